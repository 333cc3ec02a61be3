-- budgets.read (budget-redis.ts). Answers {now, lapsed, lapsed usd, fields of window 1, …}; writes
-- only what the sweep lapsed.
local answer = {now, lapsed, tostring(lapsed_usd)}
for i = 1, windows do answer[i + 3] = redis.call('HGETALL', KEYS[i + 1]) end
return answer
