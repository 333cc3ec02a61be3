-- A replica's share of a budget key (budget-shares.ts): taken, refilled, written back and given back
-- by this one script, so Redis is touched per refill or flush, not per operation. A share is a lease
-- like a reservation (its member `share<token>#<sent>:<bucket time>:<usd>` in the lease set): what
-- it holds is booked as reserved in every window, and if its replica stops renewing it, it lapses
-- into spend at its whole amount (the sweep, budget-helpers.lua).
--
-- A replica holds at most one share of a key, and the call that made its lease may have run without
-- the replica hearing (the reply lost with a killed primary's socket, or later than the timeout):
-- so the lease is found by the replica's token when the member it names is gone, and the spend is
-- sent as a running total (`sent`: every dollar the share ever wrote back, the one in its member the
-- total Redis has booked), of which Redis books what it has not yet. Nothing is booked twice and
-- nothing is dropped whichever calls ran, and no lease is left behind to lapse at its whole amount.
--
-- Own ARGV: base+1 the share's member as the replica last heard of it ('' when none), base+2 sent:
-- every dollar spent from the share since it was made, written back or not (what Redis has not
-- booked moves to spend, in the current bucket), base+3 keep: what stays held (operations in flight
-- and the room not given back), base+4 must: what stays held whatever is left (budget-shares.ts
-- passes `keep`: operations may be admitted against the room while a refill runs),
-- base+5 more: the top-up wanted, base+6 least: the smallest top-up worth taking (one operation's
-- estimate), base+7 floor: below this much left after `keep`, no top-up and only `must` stays
-- held (the last dollars go one operation at a time, by budgets.reserve), base+8 lease ms, base+9 this
-- replica's token, then per window i: base+8+2i limit, base+9+2i warning figure.
--
-- The old lease (the member named, else the one of this token) leaves the set and the windows; if it
-- had lapsed already (gone from the set), its whole amount was counted as spent by the sweep, so
-- neither the spend sent nor `keep` is booked again. Then the top-up: what is left in the tightest
-- window after `keep`, over twice the replicas counting, at most `more`, none below `least` or when
-- less than `floor` is left. The new amount is booked as reserved in the current bucket with a new
-- lease. Answers {now, lapsed, lapsed usd, found 1|0, new member or '', new amount, left after it,
-- replicas, {index, total, …} of windows due a warning, fields of window 1, …}.
local member = ARGV[base + 1]
local sent = tonumber(ARGV[base + 2])
local keep = tonumber(ARGV[base + 3])
local must = tonumber(ARGV[base + 4])
local more = tonumber(ARGV[base + 5])
local least = tonumber(ARGV[base + 6])
local floor = tonumber(ARGV[base + 7])
local lease_ms = tonumber(ARGV[base + 8])
local replicas = replicas_of(ARGV[base + 9])
local found = 0
local mine = 'share' .. ARGV[base + 9] .. '#'
for i = 1, windows do redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i)) end
-- The member named is gone (or none is named): a call whose reply never came may have replaced it.
if member == '' or redis.call('ZSCORE', KEYS[1], member) == false then
  member = ''
  for _, other in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if string.sub(other, 1, #mine) == mine then member = other end
  end
end
if member ~= '' and redis.call('ZREM', KEYS[1], member) == 1 then
  found = 1
  local at, amount = lease_of(member)
  local booked = tonumber(string.match(member, '^share[^#:]*#([^:]*):')) or sent
  local spent = math.max(0, sent - booked)
  for i = 1, windows do
    local old = bucket_of(i, at)
    if old ~= nil then bump(KEYS[i + 1], 'r' .. old, -amount) end
    if spent > 0 then bump(KEYS[i + 1], 's' .. bucket_of(i, now), spent) end
  end
end
if found == 0 then
  keep = 0
  must = 0
end
local totals = {}
local views = {}
for i = 1, windows do totals[i], views[i] = window_of(i) end
local left = remainder(totals, keep, base + 8, 2)
local amount = keep
if left >= floor then
  local top = math.min(more, left / (2 * replicas))
  if top >= least and top > 0 then amount = keep + top end
else
  amount = must
end
local new = ''
local warned = {}
if amount > 0 then
  local longest = 0
  new = mine .. string.format('%.17g', sent) .. ':' .. string.format('%.0f', now) .. ':'
    .. string.format('%.17g', amount)
  for i = 1, windows do
    if ttl_of(i) > longest then longest = ttl_of(i) end
    bump(KEYS[i + 1], 'r' .. bucket_of(i, now), amount)
    if warn_if(i, totals[i] + amount, tonumber(ARGV[base + 9 + 2 * i])) then
      warned[#warned + 1] = i
      warned[#warned + 1] = tostring(totals[i] + amount)
    end
  end
  redis.call('ZADD', KEYS[1], now + lease_ms, new)
  local hold = longest + lease_ms
  if redis.call('PTTL', KEYS[1]) < hold then redis.call('PEXPIRE', KEYS[1], hold) end
end
local answer = {now, lapsed, tostring(lapsed_usd), found, new, string.format('%.17g', amount),
  tostring(remainder(totals, amount, base + 8, 2)), replicas, warned}
for i = 1, windows do answer[i + 9] = views[i] end
return answer
