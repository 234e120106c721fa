/**
 * Lua scripts of the Redis store. Each runs atomically on the Redis primary that owns the
 * group's hash slot; all keys of one group carry the same hash tag, `{g:<group>}`.
 */

/**
 * The whole commit: resend check, fence (a transcription of commit-guard.ts `checkCommit`; the
 * contract suite runs the same cases against both), compare-and-set of every partition, writes.
 *
 * KEYS[1] offsets hash   field "<topic>:<partition>" → "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>"
 * KEYS[2] state string   GroupState as JSON
 * KEYS[3] request record the encoded outcome of this requestId, kept ARGV[2] ms
 * ARGV[1] identity JSON {g, m, i, v} or "" (no fencing); ARGV[2] ttl ms; ARGV[3] write count;
 * then per write: field, expected offset ("" = unconditional), value.
 * Returns the encoded outcome (outcome-codec.ts) as JSON.
 *
 * Offsets are compared as decimal strings: Lua numbers are doubles and cannot tell 2^63-2 from
 * 2^63-1.
 */
export const COMMIT_LUA = `
local prior = redis.call('GET', KEYS[3])
if prior then return prior end

local state = nil
local stateRaw = redis.call('GET', KEYS[2])
if stateRaw then
  local ok, decoded = pcall(cjson.decode, stateRaw)
  if not ok or type(decoded) ~= 'table' or type(decoded.members) ~= 'table' then
    return redis.error_reply('KOPCORRUPT group state is not a group record')
  end
  state = decoded
end

local function present(v) return v ~= nil and v ~= cjson.null end

local function findMember(members, id)
  for _, m in ipairs(members) do if m.memberId == id then return m end end
  return nil
end

local function guard(id)
  if id == nil then return nil end
  local gen = id.g
  if state == nil then
    if gen < 0 then return nil end
    if id.v >= 9 then return 69 end
    return 22
  end
  local members = state.members
  if state.protocol == 'consumer' then
    if gen < 0 and #members == 0 then return nil end
    local m = findMember(members, id.m)
    if m == nil then return 25 end
    if id.v < 9 then return 35 end
    if not present(m.memberEpoch) or m.memberEpoch ~= gen then return 113 end
    return nil
  end
  if gen < 0 and #members == 0 then return nil end
  if gen >= 0 or id.m ~= '' or present(id.i) then
    if present(id.i) then
      local owner = nil
      for _, m in ipairs(members) do
        if m.groupInstanceId == id.i then owner = m; break end
      end
      if owner == nil then return 25 end
      if owner.memberId ~= id.m then return 82 end
    end
    if findMember(members, id.m) == nil then return 25 end
    if gen ~= state.generationId then return 22 end
  else
    return 25
  end
  if state.state == 'CompletingRebalance' then return 27 end
  return nil
end

local identity = nil
if ARGV[1] ~= '' then identity = cjson.decode(ARGV[1]) end
local refusal = guard(identity)
local outcome
if refusal ~= nil then
  outcome = '{"s":"fenced","e":' .. refusal .. '}'
else
  local n = tonumber(ARGV[3])
  local mismatches = {}
  for i = 0, n - 1 do
    local field, expected = ARGV[4 + i * 3], ARGV[5 + i * 3]
    if expected ~= '' then
      local cur = redis.call('HGET', KEYS[1], field)
      local actual = '-1'
      if cur then
        actual = string.match(cur, '^(-?%d+)|')
        if actual == nil then return redis.error_reply('KOPCORRUPT offset of ' .. field .. ' is not a number') end
      end
      if actual ~= expected then
        local sep = string.find(field, ':[^:]*$')
        table.insert(mismatches, { t = string.sub(field, 1, sep - 1), p = tonumber(string.sub(field, sep + 1)), x = expected, a = actual })
      end
    end
  end
  if #mismatches > 0 then
    outcome = cjson.encode({ s = 'cas', m = mismatches })
  else
    local args = {}
    for i = 0, n - 1 do
      args[#args + 1] = ARGV[4 + i * 3]
      args[#args + 1] = ARGV[6 + i * 3]
    end
    if n > 0 then redis.call('HSET', KEYS[1], unpack(args)) end
    if state == nil then
      redis.call('SET', KEYS[2], '{"protocol":null,"generationId":-1,"state":"Empty","members":[],"transactional":false}')
    end
    outcome = '{"s":"ok"}'
  end
end
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])
return outcome
`;

/**
 * Compare-and-set of the group record, for membership updates: the merge itself is
 * commit-guard.ts `applyGroupUpdate`, run in the proxy; this script makes "read, merge, write"
 * atomic by writing only if the record is still what the merge started from. Every update is
 * idempotent, so a resend of this script after a reconnect is harmless.
 *
 * KEYS[1] state; ARGV[1] expected JSON ("" = absent); ARGV[2] new JSON.
 * Returns 1 when written, else the current record ("" when absent) to merge again.
 */
export const STATE_CAS_LUA = `
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return cur end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`;
