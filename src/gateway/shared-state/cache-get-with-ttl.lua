-- cache.get and documents.get of answer-store.ts: GET and PTTL in one round trip (and one timeout),
-- so that the local copy of a shared answer never outlives it. KEYS[1] the entry. Answers {value, ms
-- left} (PTTL's -2 when the key is gone).
return { redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]) }
