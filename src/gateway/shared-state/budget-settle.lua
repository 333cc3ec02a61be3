-- budgets.settle (budget-redis.ts). Own ARGV: base+1 the lease member, base+2 the dollars actually
-- spent, then per window i: base+2+i warning figure. When the lease is still there: removes it, and
-- in its bucket of each window that still holds it takes its dollars out of the reservations and adds
-- the spend. Gone (lapsed, or this settlement already ran): books nothing. Answers {lapsed, lapsed
-- usd, settled 1|0, {index, total, …} of windows due a warning}.
local member = ARGV[base + 1]
local spent = tonumber(ARGV[base + 2])
local warned = {}
if redis.call('ZREM', KEYS[1], member) == 0 then return {lapsed, tostring(lapsed_usd), 0, warned} end
local at, amount = lease_of(member)
for i = 1, windows do
  local bucket = bucket_of(i, at)
  if bucket ~= nil then
    redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
    bump(KEYS[i + 1], 'r' .. bucket, -amount)
    if spent ~= 0 then bump(KEYS[i + 1], 's' .. bucket, spent) end
    local total = window_of(i)
    if spent > amount and warn_if(i, total, tonumber(ARGV[base + 2 + i])) then
      warned[#warned + 1] = i
      warned[#warned + 1] = tostring(total)
    end
  end
end
return {lapsed, tostring(lapsed_usd), 1, warned}
