"""Lua run by Redis for the fixed-window rate limits of ``RedisState``.

A script runs atomically inside Redis, so "check every key, then count every key" cannot
interleave with another node's check: no node can slip a request between the check and the
count.  Both scripts reply ``{allowed (1|0), remaining, pttl_ms}`` as plain integers, so the
reply is never subject to txredisapi's number conversion.

Windows are fixed and open at the first counted call: ``PEXPIRE`` is set only when ``INCR``
creates the key.  A counter found without an expiry (e.g. written by hand) is given one, so a
window can never become permanent.
"""

from __future__ import annotations

#: KEYS = the counters; ARGV[1] = window in ms; ARGV[1 + i] = limit of KEYS[i].
TAKE_ALL = b"""
local window = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local count = tonumber(redis.call('GET', key) or '0')
  if count >= tonumber(ARGV[i + 1]) then
    local ttl = redis.call('PTTL', key)
    if ttl == -1 then
      redis.call('PEXPIRE', key, window)
    end
    if ttl < 0 then
      ttl = window
    end
    return {0, 0, ttl}
  end
end
local remaining = nil
for i, key in ipairs(KEYS) do
  local count = redis.call('INCR', key)
  if count == 1 or redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, window)
  end
  local left = tonumber(ARGV[i + 1]) - count
  if remaining == nil or left < remaining then
    remaining = left
  end
end
return {1, remaining or 0, 0}
"""

#: KEYS[1] = the counter; ARGV[1] = window in ms; ARGV[2] = limit.
HIT = b"""
local count = redis.call('INCR', KEYS[1])
if count == 1 or redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
local limit = tonumber(ARGV[2])
if count > limit then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    ttl = tonumber(ARGV[1])
  end
  return {0, 0, ttl}
end
return {1, limit - count, 0}
"""


# --- shared wallets (``gateway/billing/shared_wallet.py``) -----------------------------------
#
# One hash per account (``w:u:<user id>`` / ``w:k:<key id>``): ``lim`` (balance, or key quota)
# and ``used`` (a key's spent counter) while loaded, ``at`` (ms when they were installed),
# ``res`` (every node's reservations), ``pend`` (settlements queued, not committed), ``ep``
# (epoch: bumped by every forget; starts at the creation time in ms so a re-created hash never
# repeats an old one) and, for keys, ``gen`` (the ``w:kgen`` value it was last checked against:
# ``forget_all_keys`` is one INCR).  One hash per node (``w:n:<node>``) holds that node's entries
# -- ``r|<user>|<key>|<amount>`` (a reservation, field = request id), ``p|<user>|<key>|<cost>``
# (a pending debit) or ``x`` (a tombstone: the entry was given up before it arrived) -- and lives
# as long as the node's lease ``w:l:<node>``; ``w:nodes`` lists the nodes.
#
# Amounts are nano-units and may exceed 2^53, where Lua's doubles stop being exact: sums are
# kept by HINCRBY (64-bit integers in Redis) and compared here as two exact limbs (base 1e9).

_WALLET_LIB = b"""
local B = 1000000000
local function neg(a)
  if a[2] == 0 then return {-a[1], 0} end
  return {-a[1] - 1, B - a[2]}
end
local function num(s)
  s = s or '0'
  local negative = string.sub(s, 1, 1) == '-'
  if negative then s = string.sub(s, 2) end
  local n = string.len(s)
  local v = {0, tonumber(s)}
  if n > 9 then v = {tonumber(string.sub(s, 1, n - 9)), tonumber(string.sub(s, n - 8))} end
  if negative then return neg(v) end
  return v
end
local function add(a, b)
  local hi, lo = a[1] + b[1], a[2] + b[2]
  if lo >= B then return {hi + 1, lo - B} end
  return {hi, lo}
end
local function cmp(a, b)
  if a[1] ~= b[1] then if a[1] < b[1] then return -1 end return 1 end
  if a[2] ~= b[2] then if a[2] < b[2] then return -1 end return 1 end
  return 0
end
local function negated(s)
  if s == '0' then return '0' end
  if string.sub(s, 1, 1) == '-' then return string.sub(s, 2) end
  return '-' .. s
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function entry(v)
  return string.match(v, '^([rp])|(%d+)|(%d*)|(%d+)$')
end
local function take(acct, field, amount)
  if redis.call('EXISTS', acct) == 1 then redis.call('HINCRBY', acct, field, negated(amount)) end
end
-- an outside change (or a number of unknown age): drop the limit, start a new epoch
local function forget(acct)
  if redis.call('EXISTS', acct) == 1 then
    redis.call('HDEL', acct, 'lim', 'used', 'at')
    redis.call('HINCRBY', acct, 'ep', 1)
  end
end
-- the account's fields after the forgets that are due (forget_all_keys, max age)
local function open(acct, gen, now, max_age, idle)
  local f = redis.call('HMGET', acct, 'ep', 'lim', 'at', 'gen')
  if not f[1] then
    redis.call('HSET', acct, 'ep', string.format('%d', now))
    if gen then redis.call('HSET', acct, 'gen', gen) end
  elseif gen and f[4] ~= gen then
    redis.call('HSET', acct, 'gen', gen)
    forget(acct)
  elseif f[2] and max_age > 0 and now - tonumber(f[3] or '0') > max_age then
    forget(acct)
  end
  redis.call('PEXPIRE', acct, idle)
  local a = redis.call('HMGET', acct, 'ep', 'lim', 'used', 'res', 'pend')
  return {ep = a[1], lim = a[2], used = a[3] or '0', res = a[4] or '0', pend = a[5] or '0'}
end
local function key_gen(name)
  return redis.call('GET', name) or '0'
end
-- a committed number seen in the current epoch: balances only fall between forgets and spent
-- counters only rise, so the lowest balance / highest spent seen is the latest one
local function observe(acct, kind, limit, used, now)
  local f = redis.call('HMGET', acct, 'lim', 'used')
  if not f[1] then
    redis.call('HSET', acct, 'lim', limit, 'used', used, 'at', string.format('%d', now))
  elseif kind == 'u' then
    if cmp(num(limit), num(f[1])) < 0 then redis.call('HSET', acct, 'lim', limit) end
  else
    redis.call('HSET', acct, 'lim', limit)
    if cmp(num(used), num(f[2])) > 0 then redis.call('HSET', acct, 'used', used) end
  end
end
local function lease(name, nodes, node, ms)
  if redis.call('EXISTS', name) == 0 then
    redis.call('SET', name, node, 'PX', ms)
    redis.call('SADD', nodes, node)
  end
end
-- give back reservation ``field`` of node hash ``entries`` from ``user`` (and ``key``)
local function give_back(entries, field, user, key)
  local v = redis.call('HGET', entries, field)
  if not v then return 0 end
  local kind, _, _, amount = entry(v)
  if kind ~= 'r' then return 0 end
  redis.call('HDEL', entries, field)
  take(user, 'res', amount)
  if key then take(key, 'res', amount) end
  return 1
end
"""

#: KEYS: user, node entries, node lease, node set, key generation[, key].
#: ARGV: request id, amount, entry, node, lease ms, max age ms, idle ms.
#: Reply: {'ok'} | {'load', user epoch or '', key epoch or ''} | {'balance'} | {'key'} |
#: {'duplicate'}.  Checks the wallet, then the key; adds to both or neither.
WALLET_RESERVE = _WALLET_LIB + b"""
local now, max_age, idle = now_ms(), tonumber(ARGV[6]), tonumber(ARGV[7])
local u = open(KEYS[1], nil, now, max_age, idle)
local k = nil
if KEYS[6] then k = open(KEYS[6], key_gen(KEYS[5]), now, max_age, idle) end
if not u.lim or (k and not k.lim) then
  local uep, kep = '', ''
  if not u.lim then uep = u.ep end
  if k and not k.lim then kep = k.ep end
  return {'load', uep, kep}
end
local amount = num(ARGV[2])
if cmp(add(num(u.lim), neg(add(num(u.res), num(u.pend)))), amount) < 0 then
  return {'balance'}
end
if k then
  local quota = num(k.lim)
  local total = add(add(add(num(k.used), num(k.res)), num(k.pend)), amount)
  if cmp(quota, {0, 0}) > 0 and cmp(total, quota) > 0 then return {'key'} end
end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[3]) == 0 then return {'duplicate'} end
redis.call('HINCRBY', KEYS[1], 'res', ARGV[2])
if k then redis.call('HINCRBY', KEYS[6], 'res', ARGV[2]) end
lease(KEYS[3], KEYS[4], ARGV[4], ARGV[5])
return {'ok'}
"""

#: KEYS: account[, key generation] (keys only).  ARGV: epoch, kind ('u'|'k'), limit, used,
#: max age ms, idle ms.  Installs a number read from the database after the reserve that
#: answered 'load' with ``epoch``.  Reply: {'ok'} | {'stale', epoch}: a forget came between
#: (the number may predate the change): read the database again.
WALLET_INSTALL = _WALLET_LIB + b"""
local now = now_ms()
local gen = nil
if KEYS[2] then gen = key_gen(KEYS[2]) end
local a = open(KEYS[1], gen, now, tonumber(ARGV[5]), tonumber(ARGV[6]))
if a.ep ~= ARGV[1] then
  if a.lim then return {'ok'} end
  return {'stale', a.ep}
end
observe(KEYS[1], ARGV[2], ARGV[3], ARGV[4], now)
return {'ok'}
"""

#: KEYS: user, node entries, node lease, node set, key generation[, key].
#: ARGV: reservation field or '', pending field or '', cost, pending entry, node, lease ms,
#: max age ms, idle ms.  A settlement was queued: give the reservation back and hold the cost
#: as pending.  Reply: {user epoch, key epoch or ''} (the commit checks them).
WALLET_SETTLING = _WALLET_LIB + b"""
local now, max_age, idle = now_ms(), tonumber(ARGV[7]), tonumber(ARGV[8])
local u = open(KEYS[1], nil, now, max_age, idle)
local k = nil
if KEYS[6] then k = open(KEYS[6], key_gen(KEYS[5]), now, max_age, idle) end
if ARGV[1] ~= '' then give_back(KEYS[2], ARGV[1], KEYS[1], KEYS[6]) end
if ARGV[2] ~= '' and redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[4]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'pend', ARGV[3])
  if k then redis.call('HINCRBY', KEYS[6], 'pend', ARGV[3]) end
  lease(KEYS[3], KEYS[4], ARGV[5], ARGV[6])
end
local kep = ''
if k then kep = k.ep end
return {u.ep, kep}
"""

#: KEYS: user, node entries, key generation[, key].
#: ARGV: pending field or '', cost, user epoch ('' = unknown), key epoch, balance after or '',
#: spent after or '', quota or '', reservation field or '', max age ms, idle ms.
#: The settlement committed (or was abandoned: no numbers).  An unknown epoch (the settling
#: call failed) or a pending entry already swept means the numbers here may lack this debit:
#: forget them.  Otherwise the committed numbers are observed (see ``observe``).
WALLET_COMMIT = _WALLET_LIB + b"""
local now, max_age, idle = now_ms(), tonumber(ARGV[9]), tonumber(ARGV[10])
local u = open(KEYS[1], nil, now, max_age, idle)
local k = nil
if KEYS[4] then k = open(KEYS[4], key_gen(KEYS[3]), now, max_age, idle) end
local known = ARGV[3] ~= ''
if ARGV[8] ~= '' then
  give_back(KEYS[2], ARGV[8], KEYS[1], KEYS[4])
  if redis.call('HEXISTS', KEYS[2], ARGV[8]) == 0 then redis.call('HSET', KEYS[2], ARGV[8], 'x') end
end
if ARGV[1] ~= '' then
  local v = redis.call('HGET', KEYS[2], ARGV[1])
  if v and v ~= 'x' then
    take(KEYS[1], 'pend', ARGV[2])
    if k then take(KEYS[4], 'pend', ARGV[2]) end
  else
    known = false
  end
  if known then
    redis.call('HDEL', KEYS[2], ARGV[1])
  else
    redis.call('HSET', KEYS[2], ARGV[1], 'x')
  end
end
if not known or u.ep ~= ARGV[3] then
  forget(KEYS[1])
elseif ARGV[5] ~= '' then
  observe(KEYS[1], 'u', ARGV[5], '0', now)
end
if k then
  if not known or k.ep ~= ARGV[4] then
    forget(KEYS[4])
  elseif ARGV[6] ~= '' and ARGV[7] ~= '' then
    observe(KEYS[4], 'k', ARGV[7], ARGV[6], now)
  end
end
return 1
"""

#: KEYS: node entries, user[, key].  ARGV: request id, '1' to leave a tombstone when the
#: reservation is not there (its reserve call failed and may still arrive).  Reply: 1 | 0.
WALLET_RELEASE = _WALLET_LIB + b"""
local done = give_back(KEYS[1], ARGV[1], KEYS[2], KEYS[3])
if done == 0 and ARGV[2] == '1' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  redis.call('HSET', KEYS[1], ARGV[1], 'x')
end
return done
"""

#: KEYS: account.  Drop its limit and start a new epoch (reservations and pending stay).
WALLET_FORGET = _WALLET_LIB + b"""
forget(KEYS[1])
return 1
"""

#: KEYS: key generation.  Every key's numbers are reloaded on its next use.
WALLET_FORGET_ALL_KEYS = b"""
return redis.call('INCR', KEYS[1])
"""

#: KEYS: account[, key generation].  Reply: {lim or '', used, res, pend, stale (1|0)}.
WALLET_PEEK = b"""
local f = redis.call('HMGET', KEYS[1], 'lim', 'used', 'res', 'pend', 'gen')
local stale = 0
if KEYS[2] and f[5] ~= (redis.call('GET', KEYS[2]) or '0') then stale = 1 end
return {f[1] or '', f[2] or '0', f[3] or '0', f[4] or '0', stale}
"""

#: KEYS: node lease, node set.  ARGV: node, lease ms.  The node is alive for ``lease ms``.
WALLET_HEARTBEAT = b"""
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"""

#: KEYS: node set.  ARGV: key prefix of the wallet keys (``<prefix>w:``), idle ms.
#: Every node whose lease is gone gives back its reservations and pending debits (the debits'
#: accounts are forgotten: whether they were committed is unknown, the database knows).
#: Account and node keys are built here from the prefix, so this needs a standalone Redis (as
#: the rest of ``RedisState`` does).  Reply: number of nodes swept.
WALLET_SWEEP = _WALLET_LIB + b"""
local base, swept = ARGV[1], 0
for _, node in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', base .. 'l:' .. node) == 0 then
    local entries = base .. 'n:' .. node
    local all = redis.call('HGETALL', entries)
    for i = 1, #all, 2 do
      local kind, user, key, amount = entry(all[i + 1])
      if kind then
        local field = 'res'
        if kind == 'p' then field = 'pend' end
        local accounts = {base .. 'u:' .. user}
        if key ~= '' then table.insert(accounts, base .. 'k:' .. key) end
        for _, acct in ipairs(accounts) do
          take(acct, field, amount)
          if kind == 'p' then forget(acct) end
        end
      end
    end
    redis.call('DEL', entries)
    redis.call('SREM', KEYS[1], node)
    swept = swept + 1
  end
end
return swept
"""
