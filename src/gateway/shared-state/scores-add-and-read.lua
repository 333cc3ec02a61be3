-- The model scoreboard's write and read (score-store.ts). KEYS[1] the hash; ARGV[1] its TTL in ms,
-- then field, amount pairs. Adds each amount, renews the TTL (when it added any), answers every field
-- of the hash (all replicas' totals).
for i = 2, #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1]) end
if #ARGV > 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return redis.call('HGETALL', KEYS[1])
