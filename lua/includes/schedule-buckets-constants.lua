-- The schedule of a type (state SCHEDULED) is split into buckets: sorted sets
-- id -> due small enough for Redis's compact listpack encoding (about 20 bytes
-- an entry, against about 110 in a skiplist), and an index sorted set
-- bucket name -> earliest due in that bucket. Bucket keys are the index key
-- plus ':<name>', in the index's hash slot; no counter key outlives the schedule.
--
-- Invariants, kept by the functions below:
--   * an index score is exactly the earliest due of its bucket, so the index
--     head is the next due time and only buckets holding something due are read;
--   * a bucket holds nothing later than the next greater earliest due in the
--     index: buckets hold disjoint ranges of due times, except that buckets
--     sharing an earliest due (more events due in one millisecond than a
--     bucket holds) may overlap each other. So an event due at t is in a bucket
--     starting at t or in one starting at the greatest earliest due below t,
--     and finding it needs the index alone;
--   * of buckets sharing an earliest due, only the last by name holds anything
--     due later than that. Adding to such a group goes to that bucket without
--     looking at the others, and when a bucket starts between its entries, the
--     others hold nothing past that start.
-- Half of Redis's default zset-max-listpack-entries (128): adding a member
-- scans the listpack for it first, so smaller buckets cost less per event,
-- for ~2 more bytes an event (a bucket key per 64 events, not per 128).
-- A bucket filled by 0.3.0 may hold up to 128; nothing here needs a bucket
-- to be at most BUCKET_MAX.
local BUCKET_MAX = 64

local BUCKET_FILL = 48 -- most entries a bucket keeps after a split: room to grow
