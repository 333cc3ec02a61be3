-- The prelude of every budget script (budget-scripts.ts puts it in front of each one's own body).
--
-- Layout: KEYS[1] the lease set, KEYS[i + 1] the hash of window i; ARGV[2i - 1] that window's span
-- and ARGV[2i] its bucket, in ms; the script's own arguments after them (from ARGV[base + 1]).
--
-- `now`: Redis' clock in ms (one clock for every replica). `bucket_of(i, at)`: the field suffix of
-- `at`'s bucket in window i, nil once that bucket has left the window. `window_of(i)`: drops the
-- fields of window i's buckets at or before `now - span` and answers the sum of the others and their
-- flat list. `warn_if(i, total, warn)`: answers true, and notes the time in `w`, when `total` reached
-- `warn` and no warning was given within the last span. `bump(key, field, usd)`: adds, dropping a
-- field left at float noise (1e-12, budget-windows.ts' NOISE_USD). `sweep()`: every expired lease (at
-- most 64, budget-windows.ts' SWEEP_PER_CALL) moves from reservation to spend in its bucket of each
-- window and leaves the set; answers how many and their dollars. The slack of a fit is 1e-9
-- (FIT_EPSILON_USD). `replicas_of(token)`: how many replicas hold a lease of the key (a
-- share or a reservation in flight), this one counted whatever: the key's lease set is how replicas
-- know each other (a lease id starts with its replica's 8-character token; a share is
-- `share<token>#…`). `remainder(totals,
-- extra, at, stride)`: the least of every window's limit (ARGV[at + stride * i]) less its total and
-- `extra`.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local windows = #KEYS - 1
local function span_of(i) return tonumber(ARGV[2 * i - 1]) end
local function step_of(i) return tonumber(ARGV[2 * i]) end
local function ttl_of(i) return span_of(i) + 2 * step_of(i) end
local function bucket_of(i, at)
  local start = at - (at % step_of(i))
  if start > now - span_of(i) then return string.format('%.0f', start) end
  return nil
end
local function window_of(i)
  local key = KEYS[i + 1]
  local cutoff = now - span_of(i)
  local fields = redis.call('HGETALL', key)
  local total = 0
  local kept = {}
  for j = 1, #fields, 2 do
    local name = fields[j]
    local kind = string.sub(name, 1, 1)
    if kind == 's' or kind == 'r' then
      local start = tonumber(string.sub(name, 2))
      if start == nil or start <= cutoff then
        redis.call('HDEL', key, name)
      else
        total = total + (tonumber(fields[j + 1]) or 0)
        kept[#kept + 1] = name
        kept[#kept + 1] = fields[j + 1]
      end
    end
  end
  return total, kept
end
local function warn_if(i, total, warn)
  if warn < 0 or total + 1e-9 < warn then return false end
  local key = KEYS[i + 1]
  local last = tonumber(redis.call('HGET', key, 'w'))
  if last ~= nil and last > now - span_of(i) then return false end
  redis.call('HSET', key, 'w', string.format('%.0f', now))
  return true
end
local function bump(key, field, usd)
  local left = tonumber(redis.call('HINCRBYFLOAT', key, field, usd))
  if math.abs(left) < 1e-12 then redis.call('HDEL', key, field) end
end
local function lease_of(member)
  local _, _, at, usd = string.find(member, '^[^:]*:(%d+):(.+)$')
  return tonumber(at), tonumber(usd)
end
local function sweep()
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 64)
  if #due == 0 then return 0, 0 end
  -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
  for i = 1, windows do redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i)) end
  redis.call('ZREM', KEYS[1], unpack(due))
  local usd = 0
  for _, member in ipairs(due) do
    local at, amount = lease_of(member)
    if at ~= nil and amount ~= nil then
      usd = usd + amount
      for i = 1, windows do
        local bucket = bucket_of(i, at)
        if bucket ~= nil then
          bump(KEYS[i + 1], 'r' .. bucket, -amount)
          bump(KEYS[i + 1], 's' .. bucket, amount)
        end
      end
    end
  end
  return #due, usd
end
local function replicas_of(token)
  local seen = {[token] = true}
  local count = 1
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local who = string.match(member, '^share([^#:]*)') or string.sub(member, 1, 8)
    if not seen[who] then
      seen[who] = true
      count = count + 1
    end
  end
  return count
end
local function remainder(totals, extra, limit_at, stride)
  local least = nil
  for i = 1, windows do
    local left = tonumber(ARGV[limit_at + stride * i]) - totals[i] - extra
    if least == nil or left < least then least = left end
  end
  return least or 0
end
local lapsed, lapsed_usd = sweep()
local base = 2 * windows
