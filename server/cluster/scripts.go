package cluster

import (
	"encoding/hex"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Keys. Every key and channel of one office carries the same {hash tag},
// so on a Redis Cluster they live in one slot and one script may touch
// them all; the same goes for a node's lease, epoch, channel and index.
//
//	a2c:{O}:m      hash  sid -> "role|node|epoch|version|name"   the members
//	a2c:{O}:s      hash  seat -> sid  ("a" the Agent, "c:<name>" a Computer)
//	a2c:{O}:v      counter, +1 per change: the office's version
//	a2c:{O}:ev     channel of membership events
//	a2c:{N}:idx    set of the offices where node N has (or had) members
//	a2c:{N}:lease  the node's lease: its epoch, SET with PX LeaseTTL
//	a2c:{N}:ep     counter: node N's last epoch (one per registration)
//	a2c:{N}:ch     channel of frames for node N
//	a2c:nodes      set of the registered node ids (for the sweeper)
//	a2c:cn:{name}  set of the offices that hold a Computer named name

// tag is the hash tag of an office (or a Computer name): the id itself,
// or '~' and its hex form when it holds a brace (which would end or empty
// the tag) or starts with '~' (so that no two ids share a tag).
func tag(id string) string {
	if strings.ContainsAny(id, "{}") || strings.HasPrefix(id, "~") {
		return "{~" + hex.EncodeToString([]byte(id)) + "}"
	}
	return "{" + id + "}"
}

func officeKeys(office string) []string {
	t := "a2c:" + tag(office)
	return []string{t + ":m", t + ":s", t + ":v"}
}

func officeChannel(office string) string { return "a2c:" + tag(office) + ":ev" }

func nodeChannel(node string) string { return "a2c:{" + node + "}:ch" }
func nodeIndex(node string) string   { return "a2c:{" + node + "}:idx" }
func leaseKey(node string) string    { return "a2c:{" + node + "}:lease" }
func epochKey(node string) string    { return "a2c:{" + node + "}:ep" }
func nameKey(name string) string     { return "a2c:cn:" + tag(name) }

const nodesKey = "a2c:nodes"

// forgottenTTL is how long a forgotten node's epoch counter is kept (ms):
// long past any command of its last process, so a process that takes the
// id later still numbers its registrations above every record the old
// one could have left.
const forgottenTTL = "86400000"

// The node scripts. KEYS are a node's lease, epoch counter and index
// (one slot). A node's epoch numbers its registrations: each time it
// takes a lease (at start, and after losing it) the counter goes up and
// the lease holds the new value, and every member record it writes
// carries the epoch it holds. A sweeper that finds the lease gone learns,
// in the same atomic step, the highest epoch the node ever had: it
// removes the members of that epoch and below, never those a node that
// came back meanwhile has re-seated under its next epoch.

// registerScript takes the node's lease under a new epoch and returns
// it. With ARGV[2] = "nx" it takes it only if no lease exists (a process
// starting with an id a live process may hold) and returns 0 otherwise.
var registerScript = redis.NewScript(`
if ARGV[2] == 'nx' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local e = redis.call('INCR', KEYS[2])
redis.call('PERSIST', KEYS[2])
redis.call('SET', KEYS[1], e, 'PX', ARGV[1])
return e
`)

// renewScript renews the lease if it still holds this node's epoch
// ARGV[1], for ARGV[2] ms. It returns 1, or 0 when the lease is gone (it
// expired, or Redis lost it): the node must register again.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// judgeScript tells whether a node is dead, atomically with the bound of
// what to sweep: -1 while its lease lives, else its last epoch (0 if it
// never had one).
var judgeScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
return tonumber(redis.call('GET', KEYS[2]) or '0')
`)

// indexScript adds office ARGV[2] to the node's index before the node
// seats a member there, if the lease still holds the epoch ARGV[1] and
// lives at least ARGV[3] ms more. The join script that follows is sent
// within one command deadline, shorter than that, so it runs before the
// lease can expire and a sweeper can read the index: a member is never
// seated where a sweep of its epoch has already passed. It returns 1,
// -1 when the lease is gone or another epoch's, -2 when it runs too low
// (the heartbeat is late).
var indexScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then return -2 end
redis.call('SADD', KEYS[3], ARGV[2])
return 1
`)

// forgetScript forgets a swept node: its index goes and its epoch
// counter starts to expire, but only if the node is still dead and has
// not registered again since the sweep's judgement (its epoch is still
// ARGV[1]). It returns 1 when forgotten; the caller then removes the
// registration (a2c:nodes lives in another slot), which a node that
// comes back re-adds on every heartbeat.
var forgetScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if tonumber(redis.call('GET', KEYS[2]) or '0') ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`)

// nodeKeys are the KEYS of the node scripts.
func nodeKeys(node string) []string {
	return []string{leaseKey(node), epochKey(node), nodeIndex(node)}
}

// The office scripts. KEYS are officeKeys (members, seats, version); the
// event channel and the publish command (PUBLISH, or SPUBLISH on a Redis
// Cluster, whose shard channel shares the office's slot) come as ARGV.
// Each runs atomically: the check, the change, the version bump and the
// event are one step, so every node sees the office's changes in the
// order they happened, numbered without gaps. A record is
// "role|node|epoch|a2c_version|name" (see encodeMember).

// joinScript seats ARGV sid as (role, name) held by node at epoch
// ARGV[8], with the connection's a2c_version in ARGV[7]. It returns
// {0} seated, {1} already seated so (its record raised to this epoch if
// it was seated under an earlier one), {2, holderNode} the Agent seat is
// taken, {3, holderNode} the Computer name is taken, {4} the sid holds
// another seat in this office.
var joinScript = redis.NewScript(`
local sid, role, name, node, ver, ep = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[7], ARGV[8]
local seat = 'a'
if role == 'computer' then seat = 'c:' .. name end
local rec = role .. '|' .. node .. '|' .. ep .. '|' .. ver .. '|' .. name
local cur = redis.call('HGET', KEYS[1], sid)
if cur then
  if cur == rec then return {1} end
  local r, n, e, v, nm = string.match(cur, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  if r == role and n == node and v == ver and nm == name then
    if (tonumber(e) or 0) < tonumber(ep) then redis.call('HSET', KEYS[1], sid, rec) end
    return {1}
  end
  return {4}
end
local holder = redis.call('HGET', KEYS[2], seat)
if holder then
  local hrec = redis.call('HGET', KEYS[1], holder)
  if hrec then
    local hnode = string.match(hrec, '^[^|]*|([^|]*)|') or ''
    if role == 'agent' then return {2, hnode} end
    return {3, hnode}
  end
end
redis.call('HSET', KEYS[1], sid, rec)
redis.call('HSET', KEYS[2], seat, sid)
redis.call('PERSIST', KEYS[3])
local v = redis.call('INCR', KEYS[3])
redis.call(ARGV[6], ARGV[5], '+' .. v .. '|' .. sid .. '|' .. rec)
return {0}
`)

// leaveScript removes ARGV sid from the office, if it is there and, when
// ARGV[2] is not empty, held by that node. It returns the removed record,
// or false.
var leaveScript = redis.NewScript(`
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local role, node, name = string.match(rec, '^([^|]*)|([^|]*)|[^|]*|[^|]*|(.*)$')
if ARGV[2] ~= '' and node ~= ARGV[2] then return false end
local seat = 'a'
if role == 'computer' then seat = 'c:' .. name end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HGET', KEYS[2], seat) == ARGV[1] then redis.call('HDEL', KEYS[2], seat) end
local ver = redis.call('INCR', KEYS[3])
redis.call(ARGV[4], ARGV[3], '-' .. ver .. '|' .. ARGV[1] .. '|' .. rec)
if redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('PEXPIRE', KEYS[3], 86400000)
end
return rec
`)

// sweepScript removes every member held by node ARGV[1] under an epoch
// of at most ARGV[4] and publishes a departure for each, marked '!' (a
// sweep: the member's node is dead, so no answer will come from it). It
// returns {sid, record, sid, record, ...} of the removed members. Running
// it twice removes nothing the second time, so any number of nodes may
// sweep the same dead node; a member its node re-seated under a later
// epoch (it came back) is not touched.
var sweepScript = redis.NewScript(`
local all = redis.call('HGETALL', KEYS[1])
local out = {}
local bound = tonumber(ARGV[4])
for i = 1, #all, 2 do
  local sid, rec = all[i], all[i+1]
  local role, node, ep, name = string.match(rec, '^([^|]*)|([^|]*)|([^|]*)|[^|]*|(.*)$')
  if node == ARGV[1] and (tonumber(ep) or 0) <= bound then
    local seat = 'a'
    if role == 'computer' then seat = 'c:' .. name end
    redis.call('HDEL', KEYS[1], sid)
    if redis.call('HGET', KEYS[2], seat) == sid then redis.call('HDEL', KEYS[2], seat) end
    local ver = redis.call('INCR', KEYS[3])
    redis.call(ARGV[3], ARGV[2], '!' .. ver .. '|' .. sid .. '|' .. rec)
    out[#out+1] = sid
    out[#out+1] = rec
  end
end
if #out > 0 and redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('PEXPIRE', KEYS[3], 86400000)
end
return out
`)

// snapshotScript returns {version, sid, record, ...}: the office as of
// one version, read atomically.
var snapshotScript = redis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[3]) or '0')
local out = {v}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do out[#out+1] = all[i] end
return out
`)
