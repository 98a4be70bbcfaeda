//! The Lua scripts of the store: each runs atomically on one hash slot (a session's, a thread's
//! or the ledger's) and touches only the keys it is handed. Replies are small arrays whose first
//! element says what happened; the Rust side parses them defensively.
//!
//! Times inside the ledger come from Redis (`TIME`), so replicas with skewed clocks agree on
//! what expired. Scripts are replicated by their effects (Redis 7), which allows that.
//!
//! A script may run twice: the cluster client sends a command again when its connection
//! dropped before the answer, though Redis may have run it. So the scripts that take or release
//! a lock recognise a second run of themselves: taking a lock that already holds the same
//! token, or ending a turn whose token the session records as the last one ended (`ended`),
//! answers as the first run did instead of `busy` or `lost`. Any other script run twice is
//! harmless (reads and renewals repeat; the ledger's scripts set again what they set, but for
//! a turn's input charge, counted twice until the turn ends) or fails without losing a write:
//! a creation finds its id taken, a deletion finds nothing (the ledger then keeps the charge
//! until the entry expires), a thread run's end finds its lock gone.

use ::redis::Script;

/// Appends `ARGV[from..]` to list `key`, a thousand at a time (Lua's stack is bounded).
const PUSH: &str = r"
local function push(key, from)
  for i = from, #ARGV, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
";

/// KEYS: meta, history. ARGV: owner, config, state ('' for none), pending, ttl, messages…
/// 1 when stored, 0 when the id is taken.
const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'config', ARGV[2], 'pending', ARGV[4])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'state', ARGV[3]) end
push(KEYS[2], 6)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
";

/// KEYS: meta, history. ARGV: owner, ttl ('' to leave the expiry alone), 'config' or 'all'.
/// Nil for a missing session or another owner's; else {config} or {config, state, pending,
/// history}. The expiry only grows (GT), so a read never shortens a running turn's.
const READ: &str = r"
local f = redis.call('HMGET', KEYS[1], 'owner', 'config', 'state', 'pending')
if f[1] ~= ARGV[1] then return false end
if ARGV[2] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  redis.call('PEXPIRE', KEYS[2], ARGV[2], 'GT')
end
if ARGV[3] == 'config' then return {f[2]} end
return {f[2], f[3], f[4], redis.call('LRANGE', KEYS[2], 0, -1)}
";

/// KEYS: meta, history, lock. ARGV: owner. 1 when deleted.
const DELETE: &str = r"
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
";

/// KEYS: meta, history, lock. ARGV: owner, token, lock ttl, running ttl.
/// {'missing'} | {'busy'} | {'ok', config, state, pending, history}. A lock that already holds
/// the token is this very call's, sent again (see the module docs).
const BEGIN_TURN: &str = r"
local f = redis.call('HMGET', KEYS[1], 'owner', 'config', 'state', 'pending')
if f[1] ~= ARGV[1] then return {'missing'} end
if redis.call('GET', KEYS[3]) == ARGV[2] then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
elseif not redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[3]) then
  return {'busy'}
end
redis.call('PEXPIRE', KEYS[1], ARGV[4], 'GT')
redis.call('PEXPIRE', KEYS[2], ARGV[4], 'GT')
return {'ok', f[2], f[3], f[4], redis.call('LRANGE', KEYS[2], 0, -1)}
";

/// KEYS: lock, then the keys it guards. ARGV: token, lock ttl, running ttl.
/// 1 renewed; 0 the lock is another's; -1 the lock and the guarded record are gone.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[3], 'GT') end
return 1
";

/// KEYS: meta, history, lock. ARGV: token, idle ttl, 'commit' or 'none', kept, config, state
/// ('' for none), pending, messages after `kept`…
/// 'gone' (deleted), 'lost' (the lock is not ours: nothing written), 'short' (fewer than `kept`
/// stored: nothing written, the lock kept), 'ok' (written, lock released; or done already by
/// this very call, sent again: the meta's `ended` names the last token released).
const END_TURN: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'gone' end
if redis.call('GET', KEYS[3]) ~= ARGV[1] then
  if redis.call('HGET', KEYS[1], 'ended') == ARGV[1] then return 'ok' end
  return 'lost'
end
if ARGV[3] == 'commit' then
  local kept = tonumber(ARGV[4])
  if redis.call('LLEN', KEYS[2]) < kept then return 'short' end
  if kept == 0 then
    redis.call('DEL', KEYS[2])
  else
    redis.call('LTRIM', KEYS[2], 0, string.format('%d', kept - 1))
  end
  push(KEYS[2], 8)
  redis.call('HSET', KEYS[1], 'config', ARGV[5], 'pending', ARGV[7])
  if ARGV[6] == '' then
    redis.call('HDEL', KEYS[1], 'state')
  else
    redis.call('HSET', KEYS[1], 'state', ARGV[6])
  end
end
redis.call('HSET', KEYS[1], 'ended', ARGV[1])
redis.call('DEL', KEYS[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 'ok'
";

/// KEYS: record, lock. ARGV: token, lock ttl, running ttl. {'busy'} | {'ok', record or nil}.
/// A lock that already holds the token is this very call's, sent again.
const BEGIN_THREAD: &str = r"
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
elseif not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {'busy'}
end
redis.call('PEXPIRE', KEYS[1], ARGV[3], 'GT')
return {'ok', redis.call('HGET', KEYS[1], 'record')}
";

/// KEYS: record, lock. ARGV: token, owner, record, running ttl. 1 saved, 0 the lock is lost.
const SAVE_THREAD: &str = r"
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'record', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
";

/// KEYS: record, lock. ARGV: token, idle ttl, 'check' or 'release'.
/// 'lost' | 'none' (check: no record; the lock is kept for the ledger step) | 'ok' (released).
const END_THREAD: &str = r"
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 'lost' end
if ARGV[3] == 'check' and redis.call('EXISTS', KEYS[1]) == 0 then return 'none' end
redis.call('DEL', KEYS[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 'ok'
";

/// The start of every ledger script: helpers, then the purge of what expired, at most
/// `ARGV[1]` sessions and as many thread records, each giving its charge back. KEYS are
/// [`super::keys::LEDGER`]. Every ledger script replies `reply(status, extra)`: {status,
/// sessions held, thread records held, extra}. `judge(refusal)` is the refusal `refusal()`
/// finds once nothing expired is left to purge (up to ten more batches): a place held by an
/// expired entry is never refused.
const LEDGER: &str = r"
local function int(x)
  return string.format('%d', x)
end
local function add(key, field, delta)
  if delta ~= 0 then
    if redis.call('HINCRBY', key, field, int(delta)) <= 0 then redis.call('HDEL', key, field) end
  end
end
local function held(key, field)
  return tonumber(redis.call('HGET', key, field) or '0')
end
local function forget(id)
  local raw = redis.call('HGET', KEYS[2], id)
  if raw then
    local r = cjson.decode(raw)
    add(KEYS[4], r.o, -1)
    add(KEYS[5], r.o, -(r.b + r.i))
    add(KEYS[6], 'bytes', -(r.b + r.i))
    redis.call('ZREM', KEYS[3], r.l .. ':' .. id)
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREM', KEYS[1], id)
end
local function put(id, owner, list, b, i, score)
  forget(id)
  redis.call('HSET', KEYS[2], id, cjson.encode({o = owner, l = list, b = b, i = i}))
  redis.call('ZADD', KEYS[1], int(score), id)
  redis.call('ZADD', KEYS[3], 0, list .. ':' .. id)
  add(KEYS[4], owner, 1)
  add(KEYS[5], owner, b + i)
  add(KEYS[6], 'bytes', b + i)
end
local function tforget(h)
  local owner = redis.call('HGET', KEYS[8], h)
  if owner then
    add(KEYS[9], owner, -1)
    redis.call('HDEL', KEYS[8], h)
  end
  redis.call('ZREM', KEYS[7], h)
end
local function reply(status, extra)
  return {status, redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[8]), extra}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local function sweep()
  local ids = redis.call('ZRANGE', KEYS[1], '-inf', int(now), 'BYSCORE', 'LIMIT', 0, int(n))
  for _, id in ipairs(ids) do forget(id) end
  local hs = redis.call('ZRANGE', KEYS[7], '-inf', int(now), 'BYSCORE', 'LIMIT', 0, int(n))
  for _, h in ipairs(hs) do tforget(h) end
  return #ids < n and #hs < n
end
local swept = sweep()
local function judge(refusal)
  local verdict, rounds = refusal(), 0
  while verdict and not swept and rounds < 10 do
    swept = sweep()
    verdict = refusal()
    rounds = rounds + 1
  end
  return verdict
end
";

/// Nothing but the purge: the periodic refresh, and the probe of a lost connection.
const PURGE: &str = r"
return reply('ok')
";

/// A new session. ARGV: …, id, owner, list, bytes, ttl, max_sessions,
/// max_sessions_per_principal, max_total_bytes, max_bytes_per_principal.
const ADMIT: &str = r"
local owner, bytes = ARGV[3], tonumber(ARGV[5])
local refused = judge(function()
  if held(KEYS[4], owner) >= tonumber(ARGV[8]) then return 'principal_full' end
  if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[7]) then return 'full' end
  if held(KEYS[5], owner) + bytes > tonumber(ARGV[10]) then return 'principal_space' end
  if held(KEYS[6], 'bytes') + bytes > tonumber(ARGV[9]) then return 'space' end
end)
if refused then return reply(refused) end
put(ARGV[2], owner, ARGV[4], bytes, 0, now + tonumber(ARGV[6]))
return reply('ok')
";

/// A turn began: the session is charged its stored history and no input (whatever a turn
/// that died left is dropped), and registered again if the ledger lost it.
/// ARGV: …, id, owner, list, bytes, ttl.
const BEGIN: &str = r"
put(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), 0, now + tonumber(ARGV[6]))
return reply('ok')
";

/// A turn's input. ARGV: …, id, bytes, max_total_bytes, max_bytes_per_principal, ttl.
const CHARGE: &str = r"
local raw = redis.call('HGET', KEYS[2], ARGV[2])
if not raw then return reply('missing') end
local r = cjson.decode(raw)
local bytes = tonumber(ARGV[3])
local refused = judge(function()
  if held(KEYS[5], r.o) + bytes > tonumber(ARGV[5]) then return 'principal_space' end
  if held(KEYS[6], 'bytes') + bytes > tonumber(ARGV[4]) then return 'space' end
end)
if refused then return reply(refused) end
put(ARGV[2], r.o, r.l, r.b, r.i + bytes, now + tonumber(ARGV[6]))
return reply('ok')
";

/// A turn ended: the session is charged `bytes` and no input, if the ledger still has it.
/// ARGV: …, id, bytes, ttl.
const SETTLE: &str = r"
local raw = redis.call('HGET', KEYS[2], ARGV[2])
if raw then
  local r = cjson.decode(raw)
  put(ARGV[2], r.o, r.l, tonumber(ARGV[3]), 0, now + tonumber(ARGV[4]))
end
return reply('ok')
";

/// Sessions gone. ARGV: …, ids…
const FORGET: &str = r"
for i = 2, #ARGV do forget(ARGV[i]) end
return reply('ok')
";

/// One list's ids after a cursor, in byte order. ARGV: …, list, after ('' for the start), n.
const PAGE: &str = r"
local prefix = ARGV[2] .. ':'
local members = redis.call('ZRANGE', KEYS[3], '(' .. prefix .. ARGV[3], '(' .. ARGV[2] .. ';',
  'BYLEX', 'LIMIT', 0, ARGV[4])
local ids = {}
for i, m in ipairs(members) do ids[i] = string.sub(m, #prefix + 1) end
return reply('ok', ids)
";

/// Moves the expiry of known members to now + ttl. ARGV: …, 's' or 't', ttl, 'gt' (only
/// later) or 'set', members…
const TOUCH: &str = r"
local key = KEYS[1]
if ARGV[2] == 't' then key = KEYS[7] end
local score = int(now + tonumber(ARGV[3]))
for i = 5, #ARGV do
  if ARGV[4] == 'gt' then
    redis.call('ZADD', key, 'XX', 'GT', score, ARGV[i])
  else
    redis.call('ZADD', key, 'XX', score, ARGV[i])
  end
end
return reply('ok')
";

/// A thread's run began. ARGV: …, digest, owner, ttl, max_sessions,
/// max_sessions_per_principal, '1' when the thread is new (checked against the quotas).
const ADMIT_THREAD: &str = r"
local h, owner = ARGV[2], ARGV[3]
local score = int(now + tonumber(ARGV[4]))
if redis.call('HEXISTS', KEYS[8], h) == 1 then
  redis.call('ZADD', KEYS[7], score, h)
  return reply('ok')
end
if ARGV[7] == '1' then
  local refused = judge(function()
    if held(KEYS[9], owner) >= tonumber(ARGV[6]) then return 'principal_full' end
    if redis.call('HLEN', KEYS[8]) >= tonumber(ARGV[5]) then return 'full' end
  end)
  if refused then return reply(refused) end
end
redis.call('HSET', KEYS[8], h, owner)
add(KEYS[9], owner, 1)
redis.call('ZADD', KEYS[7], score, h)
return reply('ok')
";

/// A thread that never saved a record. ARGV: …, digest.
const FORGET_THREAD: &str = r"
tforget(ARGV[2])
return reply('ok')
";

/// Every script, loaded once per store (`EVALSHA`, loaded again after a Redis restart).
pub(super) struct Scripts {
    pub create: Script,
    pub read: Script,
    pub delete: Script,
    pub begin_turn: Script,
    pub renew: Script,
    pub end_turn: Script,
    pub begin_thread: Script,
    pub save_thread: Script,
    pub end_thread: Script,
    pub purge: Script,
    pub admit: Script,
    pub begin: Script,
    pub charge: Script,
    pub settle: Script,
    pub forget: Script,
    pub page: Script,
    pub touch: Script,
    pub admit_thread: Script,
    pub forget_thread: Script,
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        let pushing = |body: &str| Script::new(&format!("{PUSH}{body}"));
        let ledger = |body: &str| Script::new(&format!("{LEDGER}{body}"));
        Scripts {
            create: pushing(CREATE),
            read: Script::new(READ),
            delete: Script::new(DELETE),
            begin_turn: Script::new(BEGIN_TURN),
            renew: Script::new(RENEW),
            end_turn: pushing(END_TURN),
            begin_thread: Script::new(BEGIN_THREAD),
            save_thread: Script::new(SAVE_THREAD),
            end_thread: Script::new(END_THREAD),
            purge: ledger(PURGE),
            admit: ledger(ADMIT),
            begin: ledger(BEGIN),
            charge: ledger(CHARGE),
            settle: ledger(SETTLE),
            forget: ledger(FORGET),
            page: ledger(PAGE),
            touch: ledger(TOUCH),
            admit_thread: ledger(ADMIT_THREAD),
            forget_thread: ledger(FORGET_THREAD),
        }
    }
}
