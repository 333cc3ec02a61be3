-- budgets.reserve (budget-redis.ts). Own ARGV: base+1 dollars, base+2 slack, base+3 lease id, base+4
-- lease ms, then per window i: base+3+2i limit, base+4+2i warning figure, then base+5+2n this
-- replica's token (the replica set's member). Books the dollars as reserved in the current bucket of
-- every window when every window's total plus them stays within its limit (+ slack), with a lease:
-- answers {1, now, lapsed, lapsed usd, lease member, {index, total, …} of windows due a warning, what
-- is left of the tightest window after it, replicas counting}; else books nothing and answers {0, now,
-- lapsed, lapsed usd, fields of window 1, …}.
local usd = tonumber(ARGV[base + 1])
local slack = tonumber(ARGV[base + 2])
local totals = {}
local views = {}
local fits = true
for i = 1, windows do
  local total, kept = window_of(i)
  totals[i] = total
  views[i] = kept
  if total + usd > tonumber(ARGV[base + 3 + 2 * i]) + slack then fits = false end
end
if not fits then
  local answer = {0, now, lapsed, tostring(lapsed_usd)}
  for i = 1, windows do answer[i + 4] = views[i] end
  return answer
end
local lease_ms = tonumber(ARGV[base + 4])
local member = ARGV[base + 3] .. ':' .. string.format('%.0f', now) .. ':' .. ARGV[base + 1]
local longest = 0
local warned = {}
for i = 1, windows do
  local step = step_of(i)
  if ttl_of(i) > longest then longest = ttl_of(i) end
  -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
  redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
  redis.call('HINCRBYFLOAT', KEYS[i + 1], 'r' .. string.format('%.0f', now - (now % step)), ARGV[base + 1])
  redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
  local after = totals[i] + usd
  if warn_if(i, after, tonumber(ARGV[base + 4 + 2 * i])) then
    warned[#warned + 1] = i
    warned[#warned + 1] = tostring(after)
  end
end
redis.call('ZADD', KEYS[1], now + lease_ms, member)
-- The set outlives every lease in it until its bucket has left every window.
local keep = longest + lease_ms
if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
local left = remainder(totals, usd, base + 3, 2)
local replicas = replicas_of(ARGV[base + 5 + 2 * windows])
return {1, now, lapsed, tostring(lapsed_usd), member, warned, tostring(left), replicas}
