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
