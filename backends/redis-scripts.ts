/**
 * Lua scripts of the Redis store. Each runs atomically on the Redis primary that owns the
 * group's hash slot; all keys of one group carry the same hash tag, `{g:<group>}`.
 */

/**
 * A field whose value is longer than Redis's `hash-max-listpack-value` (64 bytes by default) turns
 * a hash into a real hash table for good. In a listpack (Redis's encoding for hashes of up to 128
 * fields) HSET finds each field by a linear scan, so a 100-partition commit into a 100-field hash
 * is ~10,000 comparisons; as a hash table it is 100 lookups (docs/stores.md has the figures). Only
 * hashes of at least HASHTABLE_FROM_FIELDS offsets get it: small groups keep the compact encoding.
 * The field name has no ':', so it is never a "<topic>:<partition>" offset; readers skip it.
 */
export const HASHTABLE_MARKER_FIELD = '~encoding';
export const HASHTABLE_MARKER_VALUE =
  'kafka-offset-proxy: a value over 64 bytes keeps this hash a hash table (HSET of many fields)';
export const HASHTABLE_FROM_FIELDS = 32;

/** What the commit script answers when it ran after its validity: it wrote and recorded nothing. */
export const EXPIRED_REPLY = '{"s":"expired"}';

/**
 * A writing script's first step: its validity. ARGV[n] is the last moment, in Redis's clock (ms
 * since the epoch, from TIME), at which the write may still apply (redis-store.ts computes it so
 * that it has passed once the proxy's own deadline has). A script that runs later (a resend
 * after a reconnect, bytes a network hop held and delivered late) writes nothing and records
 * nothing. TIME is allowed in scripts since Redis 5 replicates a script's effects, not the script.
 */
const validityPrologue = (n: number) => `
local clock = redis.call('TIME')
if tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000) > tonumber(ARGV[${n}]) then
  return '${EXPIRED_REPLY}'
end
`;

/**
 * The whole commit: validity (validityPrologue), resend check, fence (a transcription of
 * commit-guard.ts `checkCommit`; the contract suite runs the same cases against both),
 * compare-and-set of every partition, writes.
 *
 * KEYS[1] offsets hash   field "<topic>:<partition>" → "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>"
 * KEYS[2] state string   GroupState as JSON
 * KEYS[3] request record the encoded outcome of this requestId, kept ARGV[2] ms
 * KEYS[4] orders hash    field "<topic>:<partition>" → "<instance>:<seq>" (16 hex digits, 16
 *                        decimal digits), the read order of the commit that wrote the offset
 *                        (commit-order.ts; absent: none given)
 * ARGV[1] identity JSON {g, m, i, v} or "" (no fencing); ARGV[2] ttl ms; ARGV[3] the writes as
 * one MessagePack value (redis-pack.ts): [[field, value, ...], [casField, expectedOffset, ...]];
 * ARGV[4] valid until (Redis clock, ms); ARGV[5] "1" when a transactional group's commit without
 * an identity is the broker's too (CommitRequest.deferIfTransactional), else ""; ARGV[6] the
 * commit's read order "<instance>:<seq>", or "" (none: the written partitions' orders are cleared);
 * ARGV[7] with an order, how long (ms) the orders hash is kept after recording it, or "" to judge
 * the commit without recording its order (CommitOrder.contended false).
 * Returns the encoded outcome (outcome-codec.ts) as JSON, or EXPIRED_REPLY.
 *
 * Read order: after the fence and every compare-and-set passed, a write whose partition's stored
 * order has the commit's instance and a higher seq is dropped (superseded, counted in the
 * outcome's "n"): an older commit delivered late (a script held by a frozen network hop, within
 * its validity) cannot overwrite a newer acknowledged one. The orders are a hash of their own, not
 * part of the offset values, so that readers of the values (fetch, older releases during an
 * upgrade) see them unchanged.
 *
 * Only a contended commit records its orders (an older commit of the group may still reach Redis
 * after it), and the hash expires ARGV[7] ms after the last one did, longer than any such older
 * commit can still arrive: so a group without contention has no orders hash, and its commits pay
 * one EXISTS for the rule. An order left behind while uncontended commits write the partition
 * after it is older than theirs and supersedes only commits read before it; such a commit still
 * in progress would have made them contended.
 *
 * Offsets are compared as decimal strings: Lua numbers are doubles and cannot tell 2^63-2 from
 * 2^63-1.
 */
export const COMMIT_LUA =
  validityPrologue(4) +
  `
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
      local owner, owners = nil, 0
      for _, m in ipairs(members) do
        if m.groupInstanceId == id.i then owner = m; owners = owners + 1 end
      end
      if owner == nil then return 25 end
      if owners > 1 or owner.memberId ~= id.m then return 82 end
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
if (identity ~= nil or ARGV[5] == '1') and state ~= nil and state.transactional == true then
  outcome = '{"s":"txn"}'
elseif refusal ~= nil then
  outcome = '{"s":"fenced","e":' .. refusal .. '}'
else
  local writes = cmsgpack.unpack(ARGV[3])
  local hset, cas = writes[1], writes[2]
  local mismatches = {}
  for i = 1, #cas, 2 do
    local field, expected = cas[i], cas[i + 1]
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
  if #mismatches > 0 then
    outcome = cjson.encode({ s = 'cas', m = mismatches })
  else
    local order = ARGV[6] or ''
    local recordFor = ARGV[7] or ''
    local superseded = 0
    local orders = {}
    if order ~= '' and redis.call('EXISTS', KEYS[4]) == 0 then
      -- No order recorded within the window: nothing can supersede this commit.
      if recordFor ~= '' then
        for i = 1, #hset, 2 do
          orders[#orders + 1] = hset[i]
          orders[#orders + 1] = order
        end
      end
    elseif order ~= '' then
      -- Orders are "<16 hex digits>:<16 decimal digits>": a stored one is the same instance's
      -- and newer exactly when it sorts after ours and not after our instance's largest, so two
      -- string comparisons judge it (no parsing per partition).
      local newest = string.sub(order, 1, 17) .. '9999999999999999'
      local kept, counted = {}, {}
      -- In slices: unpack() of more than ~8000 values fails (Lua's C stack limit).
      for i = 1, #hset, 2000 do
        local last = math.min(i + 1998, #hset - 1)
        local fields = {}
        for j = i, last, 2 do fields[#fields + 1] = hset[j] end
        local stored = redis.call('HMGET', KEYS[4], unpack(fields))
        for k = 1, #fields do
          local j = i + 2 * (k - 1)
          local was = stored[k]
          if was and was > order and was <= newest then
            -- Partitions, not writes: a request may name one twice.
            if not counted[hset[j]] then
              counted[hset[j]] = true
              superseded = superseded + 1
            end
          else
            kept[#kept + 1] = hset[j]
            kept[#kept + 1] = hset[j + 1]
            if recordFor ~= '' then
              orders[#orders + 1] = hset[j]
              orders[#orders + 1] = order
            end
          end
        end
      end
      hset = kept
    else
      for i = 1, #hset, 2 do orders[#orders + 1] = hset[i] end
      for i = 1, #orders, 1000 do
        redis.call('HDEL', KEYS[4], unpack(orders, i, math.min(i + 999, #orders)))
      end
      orders = {}
    end
    for i = 1, #hset, 1000 do
      redis.call('HSET', KEYS[1], unpack(hset, i, math.min(i + 999, #hset)))
    end
    for i = 1, #orders, 1000 do
      redis.call('HSET', KEYS[4], unpack(orders, i, math.min(i + 999, #orders)))
    end
    if #orders > 0 then redis.call('PEXPIRE', KEYS[4], recordFor) end
    if redis.call('HLEN', KEYS[1]) >= ${HASHTABLE_FROM_FIELDS} then
      redis.call('HSETNX', KEYS[1], '${HASHTABLE_MARKER_FIELD}', '${HASHTABLE_MARKER_VALUE}')
    end
    if #orders > 0 and redis.call('HLEN', KEYS[4]) >= ${HASHTABLE_FROM_FIELDS} then
      redis.call('HSETNX', KEYS[4], '${HASHTABLE_MARKER_FIELD}', '${HASHTABLE_MARKER_VALUE}')
    end
    if state == nil then
      redis.call('SET', KEYS[2], '{"protocol":null,"generationId":-1,"state":"Empty","members":[],"transactional":false}')
    end
    if superseded > 0 then
      outcome = '{"s":"ok","n":' .. superseded .. '}'
    else
      outcome = '{"s":"ok"}'
    end
  end
end
redis.call('SET', KEYS[3], outcome, 'PX', ARGV[2])
return outcome
`;

/**
 * A membership update: a transcription of commit-guard.ts `applyGroupUpdate` (the contract's
 * property test applies random update histories through both and compares). Monotonic (older
 * generations ignored, state only advances within a generation, member epochs only grow) and
 * idempotent, so a resend after a reconnect is harmless. With a validity as a commit's: an
 * observation delivered late (a member's join held by a network hop until after it left) must not
 * bring back a member the record has since dropped, which would let its commits through.
 *
 * KEYS[1] state; ARGV[1] the GroupUpdate as JSON; ARGV[2] valid until (Redis clock, ms). The record
 * is written back as JSON built by hand: cjson would encode an empty member list as {} instead of
 * []. Returns 1, or EXPIRED_REPLY.
 */
export const UPDATE_GROUP_LUA =
  validityPrologue(2) +
  `
local s
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, decoded = pcall(cjson.decode, raw)
  if not ok or type(decoded) ~= 'table' or type(decoded.members) ~= 'table' then
    return redis.error_reply('KOPCORRUPT group state is not a group record')
  end
  s = decoded
else
  s = { protocol = cjson.null, generationId = -1, state = 'Empty', members = {}, transactional = false }
end
local u = cjson.decode(ARGV[1])
local RANK = { Empty = 0, CompletingRebalance = 1, Stable = 2, PreparingRebalance = 3 }

local function atGeneration(g)
  if g < s.generationId then return false end
  if g > s.generationId then
    s.generationId = g
    s.state = 'Empty'
    s.members = {}
  end
  s.protocol = 'classic'
  return true
end
local function rank(x)
  if type(x.rank) == 'number' then return x.rank end
  return 0
end
local function takeoverRank(memberId, instance)
  local r = 0
  if instance == nil or instance == cjson.null then return 0 end
  for _, x in ipairs(s.members) do
    if x.groupInstanceId == instance and x.memberId ~= memberId and rank(x) + 1 > r then r = rank(x) + 1 end
  end
  return r
end
local function present(v) return v ~= nil and v ~= cjson.null end
local function admit(m)
  local self = nil
  for _, x in ipairs(s.members) do
    if x.memberId == m.memberId then self = x; break end
  end
  if self == nil then
    local gi = m.groupInstanceId
    if not present(gi) then gi = cjson.null end
    self = { memberId = m.memberId, groupInstanceId = gi }
    table.insert(s.members, self)
  elseif not present(self.groupInstanceId) and present(m.groupInstanceId) then
    self.groupInstanceId = m.groupInstanceId
  end
  if rank(m) > rank(self) then self.rank = rank(m) end
  local instance = self.groupInstanceId
  if not present(instance) then return end
  local top = 0
  for _, x in ipairs(s.members) do
    if x.groupInstanceId == instance and rank(x) > top then top = rank(x) end
  end
  local kept = {}
  for _, x in ipairs(s.members) do
    if not (x.groupInstanceId == instance and rank(x) < top) then table.insert(kept, x) end
  end
  s.members = kept
end
local function advance(state)
  if RANK[state] > RANK[s.state] then s.state = state end
end
local function without(pred)
  local kept = {}
  for _, x in ipairs(s.members) do
    if not pred(x) then table.insert(kept, x) end
  end
  s.members = kept
end
local function contains(list, v)
  if type(list) ~= 'table' then return false end
  for _, x in ipairs(list) do if x == v then return true end end
  return false
end

if u.kind == 'joined' then
  if atGeneration(u.generationId) then
    local r = 0
    if u.takeover == true then r = takeoverRank(u.memberId, u.groupInstanceId) end
    if type(u.members) == 'table' then
      for _, m in ipairs(u.members) do admit({ memberId = m.memberId, groupInstanceId = m.groupInstanceId }) end
    end
    admit({ memberId = u.memberId, groupInstanceId = u.groupInstanceId, rank = r })
    advance('CompletingRebalance')
  end
elseif u.kind == 'synced' then
  if atGeneration(u.generationId) then
    admit({ memberId = u.memberId, groupInstanceId = u.groupInstanceId })
    advance('Stable')
  end
elseif u.kind == 'verified' then
  if atGeneration(u.generationId) then
    local r = takeoverRank(u.memberId, u.groupInstanceId)
    if present(u.groupInstanceId) then
      without(function(x) return x.groupInstanceId == u.groupInstanceId and x.memberId ~= u.memberId end)
    end
    admit({ memberId = u.memberId, groupInstanceId = u.groupInstanceId, rank = r })
    advance(u.state)
  end
elseif u.kind == 'rebalancing' then
  if atGeneration(u.generationId) then s.state = 'PreparingRebalance' end
elseif u.kind == 'left' then
  without(function(x)
    return contains(u.memberIds, x.memberId) or (present(x.groupInstanceId) and contains(u.groupInstanceIds, x.groupInstanceId))
  end)
  if #s.members == 0 then s.state = 'Empty' end
elseif u.kind == 'gone' then
  without(function(x) return x.memberId == u.memberId end)
  if #s.members == 0 then s.state = 'Empty' end
elseif u.kind == 'member-epoch' then
  local instance = u.instanceId
  if not present(instance) then instance = cjson.null end
  if u.exact == true and instance ~= cjson.null then
    without(function(x) return x.groupInstanceId == instance and x.memberId ~= u.memberId end)
  end
  local found = nil
  for _, x in ipairs(s.members) do
    if x.memberId == u.memberId then found = x end
  end
  if u.memberEpoch == -1 then
    without(function(x) return x.memberId == u.memberId end)
  elseif found == nil then
    table.insert(s.members, { memberId = u.memberId, groupInstanceId = instance, memberEpoch = u.memberEpoch })
  else
    if instance ~= cjson.null then found.groupInstanceId = instance end
    local cur = found.memberEpoch
    if cur == nil or cur == cjson.null then cur = -1 end
    if u.exact == true or u.memberEpoch == -2 or u.memberEpoch > cur then found.memberEpoch = u.memberEpoch else found.memberEpoch = cur end
  end
  s.protocol = 'consumer'
  if #s.members == 0 then s.state = 'Empty' else s.state = 'Stable' end
elseif u.kind == 'empty' then
  s.members = {}
  s.state = 'Empty'
elseif u.kind == 'transactional' then
  s.transactional = true
elseif u.kind == 'streams-topology' then
  if type(s.streams) ~= 'table' or s.streams.epoch < u.topology.epoch then
    s.streams = { epoch = u.topology.epoch, subtopologies = u.topology.subtopologies }
  end
else
  return redis.error_reply('unknown group update ' .. tostring(u.kind))
end

local parts = {}
for _, m in ipairs(s.members) do
  local e = ''
  if m.memberEpoch ~= nil and m.memberEpoch ~= cjson.null then e = ',"memberEpoch":' .. string.format('%d', m.memberEpoch) end
  if type(m.rank) == 'number' and m.rank > 0 then e = e .. ',"rank":' .. string.format('%d', m.rank) end
  table.insert(parts, '{"memberId":' .. cjson.encode(m.memberId) .. ',"groupInstanceId":' .. cjson.encode(m.groupInstanceId) .. e .. '}')
end
local streams = ''
if type(s.streams) == 'table' then
  streams = ',"streams":{"epoch":' .. string.format('%d', s.streams.epoch) .. ',"subtopologies":' .. cjson.encode(s.streams.subtopologies) .. '}'
end
redis.call('SET', KEYS[1], '{"protocol":' .. cjson.encode(s.protocol) .. ',"generationId":' .. string.format('%d', s.generationId)
  .. ',"state":' .. cjson.encode(s.state) .. ',"members":[' .. table.concat(parts, ',') .. '],"transactional":' .. tostring(s.transactional == true) .. streams .. '}')
return 1
`;

/**
 * OffsetDelete: removes the fields (and their read orders), and the whole hash once only the
 * hash-table marker is left, so a group without offsets leaves no key behind (as before the
 * marker existed). With a validity as a commit's: a delete answered with an error must not
 * remove offsets committed after it.
 *
 * KEYS[1] offsets hash, KEYS[2] orders hash; ARGV[1] valid until (Redis clock, ms); ARGV[2..]
 * the "<topic>:<partition>" fields. Returns 0, or EXPIRED_REPLY.
 */
export const DELETE_OFFSETS_LUA =
  validityPrologue(1) +
  `
for _, key in ipairs(KEYS) do
  redis.call('HDEL', key, unpack(ARGV, 2))
  if redis.call('HLEN', key) == 1 and redis.call('HEXISTS', key, '${HASHTABLE_MARKER_FIELD}') == 1 then
    redis.call('DEL', key)
  end
end
return 0
`;

/**
 * DeleteGroups (and the admin's group delete): the group's offsets, read orders and state, with
 * a validity.
 *
 * KEYS[1] offsets hash, KEYS[2] state, KEYS[3] orders hash; ARGV[1] valid until (Redis clock,
 * ms). Returns 0, or EXPIRED_REPLY.
 */
export const DELETE_GROUP_LUA =
  validityPrologue(1) +
  `
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 0
`;

/**
 * KEYS[1] the lease; ARGV[1] holder, ARGV[2] ttl ms. Takes the lease when it is free or ours
 * (renewing it), in Redis's own clock. Returns 1 when held by ARGV[1], else 0.
 */
export const LEASE_LUA = `
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`;

/** KEYS[1] the lease; ARGV[1] holder: deletes it only if ARGV[1] holds it. */
export const RELEASE_LEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`;
