-- The replica registry (replica-registry.ts): one sorted set of the replicas using the budgets' Redis,
-- member a replica's token, score when it last beat (Redis time, ms). One key touched alone, untagged
-- (any Cluster slot will do). KEYS[1] the set; ARGV[1] this replica's token, ARGV[2] how long an entry
-- counts after its beat (ms), ARGV[3] '1' to leave (a graceful close). PEXPIRE first: a write that is
-- never refused for memory, so a full Redis (noeviction) still runs the rest (the budget scripts do
-- the same). Answers the replicas counting now (this one included unless it left).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('PEXPIRE', KEYS[1], ttl)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
return redis.call('ZCARD', KEYS[1])
