"""Lua run by Redis for ``SharedWallets``: every check-and-change of an account is one script.

Accounts are hashes: ``limit`` (a user's spendable balance, or a key's quota) and ``used``
(a key's spent counter) as last loaded from the database and moved by committed settlements;
``reserved`` and ``pending`` (in-flight reservations and queued debits of every node); ``ver``,
bumped by every commit and forget so that a load that raced one never installs its number.
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

#: KEYS = holds, user[, key]; ARGV = amount, member, expires_ms.
#: -> {1, 0} admitted | {0, 1} balance short | {0, 2} key quota short | {-1, 1|2} load first
RESERVE = b"""
local amount = tonumber(ARGV[1])
local user = KEYS[2]
local key = KEYS[3]
local ulimit = redis.call('HGET', user, 'limit')
if not ulimit then return {-1, 1} end
local klimit = nil
if key then
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

#: KEYS = hash; ARGV = ver seen before reading the database, limit, used.
#: -> {1} installed | {0} a commit or forget came in between (read again) or already loaded
INSTALL = b"""
if redis.call('HEXISTS', KEYS[1], 'limit') == 1 then return {0} end
if (redis.call('HGET', KEYS[1], 'ver') or '0') ~= ARGV[1] then return {0} end
redis.call('HSET', KEYS[1], 'limit', ARGV[2], 'used', ARGV[3])
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
#: Applies a commit as a delta (commutes with other nodes' commits) and bumps ``ver``.
SETTLED = b"""
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local amount = -tonumber(ARGV[2])
  redis.call('HINCRBY', KEYS[2], 'pending', amount)
  if KEYS[3] then redis.call('HINCRBY', KEYS[3], 'pending', amount) end
end
if ARGV[3] ~= '' then
  local charged = tonumber(ARGV[3])
  redis.call('HINCRBY', KEYS[2], 'ver', 1)
  if redis.call('HEXISTS', KEYS[2], 'limit') == 1 then
    redis.call('HINCRBY', KEYS[2], 'limit', -charged)
  end
  if KEYS[3] then
    redis.call('HINCRBY', KEYS[3], 'ver', 1)
    if redis.call('HEXISTS', KEYS[3], 'limit') == 1 then
      redis.call('HINCRBY', KEYS[3], 'used', charged)
    end
  end
end
return {1}
"""

#: KEYS = hash.  The next admission loads the account again; holds stay counted.
FORGET = b"""
redis.call('HDEL', KEYS[1], 'limit', 'used')
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {1}
"""

#: KEYS = holds; ARGV = now_ms, account key prefix, max members.  -> {members swept}
SWEEP = b"""
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
local swept = 0
for _, member in ipairs(expired) do
  if redis.call('ZREM', KEYS[1], member) == 1 then
    local kind, rid, uid, kid, amount = string.match(member, '^(%a):(.*):(%d+):(%d*):(%d+)$')
    if kind then
      local field = 'pending'
      if kind == 'r' then field = 'reserved' end
      redis.call('HINCRBY', ARGV[2] .. 'u:' .. uid, field, -tonumber(amount))
      if kid ~= '' then
        redis.call('HINCRBY', ARGV[2] .. 'k:' .. kid, field, -tonumber(amount))
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
