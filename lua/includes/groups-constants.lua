-- A group being removed (remove-group.lua) stays in the registry with this
-- value until it holds nothing: events are no longer delivered to it, but a
-- cancel or a replace still reaches what it holds.
local GROUP_REMOVING = 'removing'
