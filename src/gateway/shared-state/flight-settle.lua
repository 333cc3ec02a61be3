-- flights.settle (flight-coordinator.ts): publishes the answer (if any) before releasing the lock,
-- atomically, so a follower never sees the lock gone and the answer not yet there; the lock is released
-- only if it is still this process'. KEYS[1] the lock, KEYS[2] the answer; ARGV[1] this process'
-- token, ARGV[2] the answer as JSON ('' none), ARGV[3] its TTL (ms). Answers 1.
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
