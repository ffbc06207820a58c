"""The Lua scripts of RedisStore: every write is one script, atomic and totally ordered.

A script only touches keys of one hash slot (one session's keys and its bucket's index, or the
usage keys), so the same scripts run on one server and on Redis Cluster.
"""

from __future__ import annotations

from windowfit.store.base import SCHEMA_VERSION

# How long a write's operation id is remembered to make retried commands idempotent.
_OP_TTL = 600
_CORRUPT = "WINDOWFIT_CORRUPT"
_EVICTED = "WINDOWFIT_EVICTED"
_METRICS_INT = (
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "calls",
    "unpriced_calls",
)

_PRELUDE = f"""
local function clock()
  local t = redis.call('TIME')
  return string.format('%d.%06d', t[1], t[2])
end
local function wrong(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    return '{_CORRUPT} key ' .. key .. ' holds a ' .. t .. ', expected a ' .. want
  end
  return nil
end
local function touch(meta, epoch, now)
  if redis.call('HSETNX', meta, 'epoch', epoch) == 1 then
    redis.call('HSET', meta, 'created_at', now, 'state_version', 0, 'status', 'open',
               'schema', {SCHEMA_VERSION})
  end
  redis.call('HSET', meta, 'updated_at', now)
end
local function expire(ttl, ...)
  if tonumber(ttl) > 0 then
    for _, k in ipairs({{...}}) do redis.call('EXPIRE', k, ttl) end
  end
end
"""

# KEYS: msgs, meta, index, op, kids   ARGV: id, epoch, ttl, op_ttl, records...
_APPEND = (
    _PRELUDE
    + f"""
local done = redis.call('GET', KEYS[4])
if done then return tonumber(done) end
local bad = wrong(KEYS[1], 'list') or wrong(KEYS[2], 'hash')
if bad then return redis.error_reply(bad) end
local now = clock()
-- listed in its bucket's index, unexpired, yet its record is gone: the server evicted it, and
-- a write now would start a new, shorter history under the same id
if redis.call('EXISTS', KEYS[2]) == 0 then
  local listed = redis.call('ZSCORE', KEYS[3], ARGV[1])
  local ttl = tonumber(ARGV[3])
  if listed and (ttl == 0 or tonumber(listed) + ttl > tonumber(now) + 1) then
    return redis.error_reply('{_EVICTED} the record of session ' .. ARGV[1] .. ' is gone')
  end
end
touch(KEYS[2], ARGV[2], now)
local n = 0
for i = 5, #ARGV, 1000 do
  n = redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
local start = n - (#ARGV - 4)
-- the messages written, counted, not the list's length: a list the server evicted between
-- two writes would be re-created short, and reads would see nothing missing
redis.call('HINCRBY', KEYS[2], 'length', #ARGV - 4)
redis.call('ZADD', KEYS[3], now, ARGV[1])
expire(ARGV[3], KEYS[1], KEYS[2], KEYS[5])
redis.call('SET', KEYS[4], start, 'EX', ARGV[4])
return start
"""
)

# KEYS: meta, index, msgs, kids   ARGV: id, epoch, ttl, expected, has_state, state, op
_SAVE_STATE = (
    _PRELUDE
    + f"""
local bad = wrong(KEYS[1], 'hash')
if bad then return redis.error_reply(bad) end
local v = redis.call('HGET', KEYS[1], 'state_version')
local cur = 0
if v then
  cur = tonumber(v)
  if not cur then return redis.error_reply('{_CORRUPT} state_version is not a number') end
  if redis.call('HGET', KEYS[1], 'state_op') == ARGV[7] then return {{0, cur}} end
end
if cur ~= tonumber(ARGV[4]) then return {{1, cur}} end
local now = clock()
touch(KEYS[1], ARGV[2], now)
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'state', ARGV[6])
else
  redis.call('HDEL', KEYS[1], 'state')
end
redis.call('HSET', KEYS[1], 'state_version', cur + 1, 'state_op', ARGV[7])
redis.call('ZADD', KEYS[2], now, ARGV[1])
expire(ARGV[3], KEYS[1], KEYS[3], KEYS[4])
return {{0, cur + 1}}
"""
)

# Sub-agent operations touch two sessions, whose keys may live in different hash slots (Redis
# Cluster): each is a sequence of single-slot scripts, ordered so that a client dying between two
# leaves nothing a later call cannot complete.

# Step 1 of create_child, in the child's slot: create it (nothing if the id is taken).
# KEYS: child meta, child msgs, child index, op
# ARGV: child id, parent id, child epoch, ttl, op_ttl, task, tool_call_id, meta, records...
_CREATE_CHILD = (
    _PRELUDE
    + f"""
if redis.call('GET', KEYS[4]) then return 1 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local bad = wrong(KEYS[2], 'list')
if bad then return redis.error_reply(bad) end
local now = clock()
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'epoch', ARGV[3], 'created_at', now, 'updated_at', now,
           'state_version', 0, 'status', 'open', 'schema', {SCHEMA_VERSION}, 'parent_id', ARGV[2])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'task', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'tool_call_id', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'meta', ARGV[8]) end
for i = 9, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'length', redis.call('LLEN', KEYS[2]))
redis.call('ZADD', KEYS[3], now, ARGV[1])
expire(ARGV[4], KEYS[1], KEYS[2])
redis.call('SET', KEYS[4], 1, 'EX', ARGV[5])
return 1
"""
)

# Step 2 of create_child, in the parent's slot: list the child (idempotent).
# KEYS: parent meta, parent kids, parent index, parent msgs   ARGV: parent id, child id, epoch, ttl
_ADOPT = (
    _PRELUDE
    + """
local bad = wrong(KEYS[1], 'hash') or wrong(KEYS[2], 'zset')
if bad then return redis.error_reply(bad) end
local now = clock()
touch(KEYS[1], ARGV[3], now)
redis.call('ZADD', KEYS[2], 'NX', now, ARGV[2])
redis.call('ZADD', KEYS[3], now, ARGV[1])
expire(ARGV[4], KEYS[1], KEYS[2], KEYS[4])
return 1
"""
)

# Step 1 of finish_child, in the parent's slot: append the hand-back message once per child.
# The parent remembers ``done:<child>`` = [index, result], so a second finish is a conflict and a
# finish cut short before step 2 can be completed from it.
# KEYS: parent meta, parent msgs, parent index, op, parent kids
# ARGV: parent id, child id, parent epoch, record, done ([index, result] JSON sans index), ttl,
#       op_ttl
_HAND_BACK = (
    _PRELUDE
    + """
local done = redis.call('GET', KEYS[4])
if done then return {0, tonumber(done), ''} end
local bad = wrong(KEYS[1], 'hash') or wrong(KEYS[2], 'list')
if bad then return redis.error_reply(bad) end
local prior = redis.call('HGET', KEYS[1], 'done:' .. ARGV[2])
if prior then return {1, 0, prior} end
local now = clock()
touch(KEYS[1], ARGV[3], now)
local n = redis.call('RPUSH', KEYS[2], ARGV[4])
redis.call('HINCRBY', KEYS[1], 'length', 1)
redis.call('HSET', KEYS[1], 'done:' .. ARGV[2], (n - 1) .. ARGV[5])
redis.call('ZADD', KEYS[3], now, ARGV[1])
expire(ARGV[6], KEYS[1], KEYS[2], KEYS[5])
redis.call('SET', KEYS[4], n - 1, 'EX', ARGV[7])
return {0, n - 1, ''}
"""
)

# Step 2 of finish_child, in the child's slot: mark it finished (idempotent).
# KEYS: child meta, child index   ARGV: child id, result, result index
_MARK_FINISHED = (
    _PRELUDE
    + """
local bad = wrong(KEYS[1], 'hash')
if bad then return redis.error_reply(bad) end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local now = clock()
redis.call('HSET', KEYS[1], 'status', 'finished', 'result', ARGV[2], 'updated_at', now,
           'result_index', ARGV[3])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return 1
"""
)

# Moves one session written by the previous layout (``P:m:<id>``...) to the current one (a
# single server only: that layout never ran on a cluster). Idempotent, one session at a time.
# KEYS: old meta, old msgs, old kids, old index, new meta, new msgs, new kids, new index
# ARGV: id
_MIGRATE = """
local score = redis.call('ZSCORE', KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
for i = 1, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('RENAME', KEYS[i], KEYS[i + 4]) end
end
if score then redis.call('ZADD', KEYS[8], score, ARGV[1]) end
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
"""

# KEYS: meta, msgs, kids, index   ARGV: id, cutoff ('' = unconditional)
_DELETE = """
if ARGV[2] ~= '' then
  local score = redis.call('ZSCORE', KEYS[4], ARGV[1])
  if score and tonumber(score) >= tonumber(ARGV[2]) then return 0 end
end
local existed = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
if existed > 0 then return 1 end
return 0
"""

# Adds a usage hash of the previous layout into the current one, then removes it (idempotent).
# KEYS: old hash, new hash
_MERGE_USAGE = """
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 5) == 'cost:' then
    redis.call('HINCRBYFLOAT', KEYS[2], fields[i], fields[i + 1])
  else
    redis.call('HINCRBY', KEYS[2], fields[i], fields[i + 1])
  end
end
redis.call('DEL', KEYS[1])
return #fields / 2
"""

# KEYS: op, days set, day hash, [session hash]
# ARGV: op_ttl, session ttl, day, then (key index, field, 'i'|'f', amount) quads
_USAGE = """
if redis.call('GET', KEYS[1]) then return 0 end
for i = 4, #ARGV, 4 do
  local key = KEYS[tonumber(ARGV[i])]
  if ARGV[i + 2] == 'f' then
    redis.call('HINCRBYFLOAT', key, ARGV[i + 1], ARGV[i + 3])
  else
    redis.call('HINCRBY', key, ARGV[i + 1], ARGV[i + 3])
  end
end
redis.call('SADD', KEYS[2], ARGV[3])
if #KEYS >= 4 and tonumber(ARGV[2]) > 0 then redis.call('EXPIRE', KEYS[4], ARGV[2]) end
redis.call('SET', KEYS[1], 1, 'EX', ARGV[1])
return 1
"""

# The server's clock. KEYS: any key (it routes the call to a node on Redis Cluster).
_CLOCK = "return redis.call('TIME')"

_SCRIPTS = {
    "clock": _CLOCK,
    "append": _APPEND,
    "save_state": _SAVE_STATE,
    "create_child": _CREATE_CHILD,
    "adopt": _ADOPT,
    "hand_back": _HAND_BACK,
    "mark_finished": _MARK_FINISHED,
    "migrate": _MIGRATE,
    "merge_usage": _MERGE_USAGE,
    "delete": _DELETE,
    "usage": _USAGE,
}
