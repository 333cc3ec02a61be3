-- documents.set with an owner (answer-store.ts): counts one more new entry of the owner and answers
-- the count. KEYS[1] the owner's counter, ARGV[1] its window (ms), set on the first. Alone in its
-- script: the entry and its owner's counter have unrelated digests, so on a Redis Cluster they are in
-- different slots, where one script may not touch both.
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
