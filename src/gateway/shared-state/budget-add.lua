-- budgets.add and the outage ledger's owed spend (budget-redis.ts). Own ARGV: base+1 the bucket's
-- time (ms; 0: now), base+2 dollars of spend, then per window i: base+2+i warning figure. Adds the
-- spend in the bucket of base+1 of each window that still holds it; answers {lapsed, lapsed usd,
-- {index, total, …} of the windows due a warning}.
local at = tonumber(ARGV[base + 1])
if at <= 0 then at = now end
local spent = tonumber(ARGV[base + 2])
local warned = {}
for i = 1, windows do
  local bucket = bucket_of(i, at)
  if bucket ~= nil then
    -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
    redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
    bump(KEYS[i + 1], 's' .. bucket, spent)
    redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
    local total = window_of(i)
    if spent > 0 and warn_if(i, total, tonumber(ARGV[base + 2 + i])) then
      warned[#warned + 1] = i
      warned[#warned + 1] = tostring(total)
    end
  end
end
return {lapsed, tostring(lapsed_usd), warned}
