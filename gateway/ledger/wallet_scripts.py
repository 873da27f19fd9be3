"""Lua run by Redis for ``SharedWallets``: every check-and-change of an account is one script.

Accounts are hashes: ``limit`` (a user's spendable balance, or a key's quota) and ``used``
(a key's spent counter) as last loaded from the database and moved by committed settlements;
``reserved`` and ``pending`` (in-flight reservations and queued debits of every node); ``ver``,
bumped by every forget so that a load that raced one never installs its number; ``gen`` (key
accounts: the key generation they were last checked against); ``missed``,
the commits reported while no limit was loaded (a load in progress takes them off its number).
Every hold (a reservation or a queued debit) is also a member of one sorted set, scored by the
time it expires unless its node renews it, so a node that dies cannot hold money forever.

Members are ``<kind>:<request id>:<user id>:<key id or empty>:<nano-units>``; kind ``r`` is a
reservation (counted in ``reserved``), ``p`` a queued debit (counted in ``pending``).  Removing
a member and un-counting it happen in the same script, and only when the removal succeeded,
so a hold is given back exactly once whoever (its node or the sweeper) gets there first.

Replies are lists of plain integers (txredisapi's number conversion never applies to them).
Amounts fit Lua's doubles exactly up to 2^53 nano-units (about nine million balance units).
"""

from __future__ import annotations

#: KEYS = holds, user, user generation[, key, key generation]; ARGV = amount, member,
#: expires_ms.
#: -> {1, 0} admitted | {0, 1} balance short | {0, 2} key quota short | {-1, 1|2} load first
#: An account checked against an older generation (``forget_all_users`` / ``forget_all_keys``
#: moved it on) is forgotten here, on its next use, rather than by visiting every account.
RESERVE = b"""
local amount = tonumber(ARGV[1])
local user = KEYS[2]
local key = KEYS[4]
local ugeneration = redis.call('GET', KEYS[3]) or '0'
if (redis.call('HGET', user, 'gen') or '0') ~= ugeneration then
  redis.call('HDEL', user, 'limit', 'used')
  redis.call('HINCRBY', user, 'ver', 1)
  redis.call('HSET', user, 'gen', ugeneration)
  return {-1, 1}
end
local ulimit = redis.call('HGET', user, 'limit')
if not ulimit then return {-1, 1} end
local klimit = nil
if key then
  local generation = redis.call('GET', KEYS[5]) or '0'
  if (redis.call('HGET', key, 'gen') or '0') ~= generation then
    redis.call('HDEL', key, 'limit', 'used')
    redis.call('HINCRBY', key, 'ver', 1)
    redis.call('HSET', key, 'gen', generation)
    return {-1, 2}
  end
  klimit = redis.call('HGET', key, 'limit')
  if not klimit then return {-1, 2} end
end
local u = redis.call('HMGET', user, 'reserved', 'pending')
if tonumber(ulimit) - tonumber(u[1] or '0') - tonumber(u[2] or '0') < amount then
  return {0, 1}
end
if key then
  local quota = tonumber(klimit)
  if quota > 0 then
    local k = redis.call('HMGET', key, 'used', 'reserved', 'pending')
    local taken = tonumber(k[1] or '0') + tonumber(k[2] or '0') + tonumber(k[3] or '0')
    if taken + amount > quota then return {0, 2} end
  end
  redis.call('HINCRBY', key, 'reserved', amount)
end
redis.call('HINCRBY', user, 'reserved', amount)
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
return {1, 0}
"""

#: KEYS = hash; ARGV = ver and missed seen before reading the database, limit, used, kind
#: ('u' user | 'k' key).  -> {1} installed | {0} already loaded, or a forget came in between
#: (read again).  Commits reported meanwhile (``missed`` grew) are taken off the number read:
#: the read may or may not include them, and counting one twice only refuses early.
INSTALL = b"""
if redis.call('HEXISTS', KEYS[1], 'limit') == 1 then return {0} end
local f = redis.call('HMGET', KEYS[1], 'ver', 'missed')
if (f[1] or '0') ~= ARGV[1] then return {0} end
local missed = tonumber(f[2] or '0') - tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'limit', ARGV[3], 'used', ARGV[4])
if missed ~= 0 then
  if ARGV[5] == 'k' then
    redis.call('HINCRBY', KEYS[1], 'used', missed)
  else
    redis.call('HINCRBY', KEYS[1], 'limit', -missed)
  end
end
return {1}
"""

#: KEYS = holds, user[, key]; ARGV = reservation member or '', its amount, debit member or '',
#: its amount, expires_ms.  The reservation (if still held) becomes the queued debit.
SETTLING = b"""
if ARGV[1] ~= '' and redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local amount = -tonumber(ARGV[2])
  redis.call('HINCRBY', KEYS[2], 'reserved', amount)
  if KEYS[3] then redis.call('HINCRBY', KEYS[3], 'reserved', amount) end
end
if ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[1], ARGV[5], ARGV[3])
  redis.call('HINCRBY', KEYS[2], 'pending', ARGV[4])
  if KEYS[3] then redis.call('HINCRBY', KEYS[3], 'pending', ARGV[4]) end
end
return {1}
"""

#: KEYS = holds, user[, key]; ARGV = debit member, its amount, charged ('' = not committed).
#: Applies a commit as a delta (commutes with other nodes' commits); with no limit loaded the
#: delta goes to ``missed``, for a load in progress to take off (see INSTALL).
SETTLED = b"""
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local amount = -tonumber(ARGV[2])
  redis.call('HINCRBY', KEYS[2], 'pending', amount)
  if KEYS[3] then redis.call('HINCRBY', KEYS[3], 'pending', amount) end
end
if ARGV[3] ~= '' then
  local charged = tonumber(ARGV[3])
  if redis.call('HEXISTS', KEYS[2], 'limit') == 1 then
    redis.call('HINCRBY', KEYS[2], 'limit', -charged)
  else
    redis.call('HINCRBY', KEYS[2], 'missed', charged)
  end
  if KEYS[3] then
    if redis.call('HEXISTS', KEYS[3], 'limit') == 1 then
      redis.call('HINCRBY', KEYS[3], 'used', charged)
    else
      redis.call('HINCRBY', KEYS[3], 'missed', charged)
    end
  end
end
return {1}
"""

#: KEYS = the user or the key generation.  Every account of that kind loads again on its next
#: use (see RESERVE).
FORGET_ALL = b"""
return {redis.call('INCR', KEYS[1])}
"""

#: KEYS = hash.  The next admission loads the account again; holds stay counted.
FORGET = b"""
redis.call('HDEL', KEYS[1], 'limit', 'used')
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {1}
"""

#: KEYS = holds; ARGV = now_ms, account key prefix, max members.  -> {members swept}
#: An expired queued debit may have been committed by a node that died before it could report
#: the commit: its accounts are forgotten, so the next admission reads the database (which
#: knows) rather than a limit that may still lack the debit.
SWEEP = b"""
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local swept = 0
for _, member in ipairs(expired) do
  if redis.call('ZREM', KEYS[1], member) == 1 then
    local kind, rid, uid, kid, amount = string.match(member, '^(%a):(.*):(%d+):(%d*):(%d+)$')
    if kind then
      local field = 'pending'
      if kind == 'r' then field = 'reserved' end
      local accounts = {ARGV[2] .. 'u:' .. uid}
      if kid ~= '' then table.insert(accounts, ARGV[2] .. 'k:' .. kid) end
      for _, account in ipairs(accounts) do
        redis.call('HINCRBY', account, field, -tonumber(amount))
        if kind == 'p' then
          redis.call('HDEL', account, 'limit', 'used')
          redis.call('HINCRBY', account, 'ver', 1)
        end
      end
      swept = swept + 1
    end
  end
end
return {swept}
"""

#: KEYS = holds; ARGV = expires_ms, members...  Pushes out the expiry of holds still present.
RENEW = b"""
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[1], ARGV[i])
end
return {renewed}
"""

#: KEYS = holds; ARGV = expires_ms, account key prefix, members...  -> {members added back}
#: A node's own holds after the shared state was lost: a member still present only has its
#: expiry pushed out; one that is gone (Redis restarted empty, or the sweep took it while the
#: node could not renew) is added and counted again, since its request is still running.
RESTORE = b"""
local restored = 0
for i = 3, #ARGV do
  local member = ARGV[i]
  if redis.call('ZADD', KEYS[1], ARGV[1], member) == 1 then
    local kind, rid, uid, kid, amount = string.match(member, '^(%a):(.*):(%d+):(%d*):(%d+)$')
    if kind then
      local field = 'pending'
      if kind == 'r' then field = 'reserved' end
      redis.call('HINCRBY', ARGV[2] .. 'u:' .. uid, field, tonumber(amount))
      if kid ~= '' then redis.call('HINCRBY', ARGV[2] .. 'k:' .. kid, field, tonumber(amount)) end
      restored = restored + 1
    end
  end
end
return {restored}
"""
