-- The error log of an event: its last ERROR_LOG_MAX failures, oldest first,
-- as JSON [[attempt, at ms, message], ...] in the queue's error-log hash
-- (id -> log), beside the errors hash that holds the last message alone.
-- Removed with the event (cancel, replace, purge, success) like its last error.
local ERROR_LOG_MAX = 10

local function error_log_append(log_key, id, attempt, at, message)
  local stored = redis.call('HGET', log_key, id)
  local log = {}
  if stored then
    local ok, decoded = pcall(cjson.decode, stored)
    if ok and type(decoded) == 'table' then log = decoded end
  end
  log[#log + 1] = { attempt, at, message }
  while #log > ERROR_LOG_MAX do table.remove(log, 1) end
  redis.call('HSET', log_key, id, cjson.encode(log))
end
