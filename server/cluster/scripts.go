package cluster

import (
	"encoding/hex"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Keys. Every key and channel of one office carries the same {hash tag},
// so on a Redis Cluster they live in one slot and one script may touch
// them all; the same goes for a node's channel and index.
//
//	a2c:{O}:m      hash  sid -> "role|node|a2c_version|name"   the members
//	a2c:{O}:s      hash  seat -> sid  ("a" the Agent, "c:<name>" a Computer)
//	a2c:{O}:v      counter, +1 per change: the office's version
//	a2c:{O}:ev     channel of membership events
//	a2c:{N}:idx    set of the offices where node N has (or had) members
//	a2c:{N}:lease  the node's lease, SET with PX LeaseTTL
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
func nameKey(name string) string     { return "a2c:cn:" + tag(name) }

const nodesKey = "a2c:nodes"

// The scripts. KEYS are officeKeys (members, seats, version); the last
// two ARGV are the event channel and the publish command (PUBLISH, or
// SPUBLISH on a Redis Cluster, whose shard channel shares the office's
// slot). Each runs atomically: the check, the change, the version bump
// and the event are one step, so every node sees the office's changes in
// the order they happened, numbered without gaps.

// joinScript seats ARGV sid as (role, name) held by node, with the
// connection's a2c_version in ARGV[7]. It returns
// {0} seated, {1} already seated so, {2, holderNode} the Agent seat is
// taken, {3, holderNode} the Computer name is taken, {4} the sid holds
// another seat in this office.
var joinScript = redis.NewScript(`
local sid, role, name, node = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local seat = 'a'
if role == 'computer' then seat = 'c:' .. name end
local rec = role .. '|' .. node .. '|' .. ARGV[7] .. '|' .. name
local cur = redis.call('HGET', KEYS[1], sid)
if cur then
  if cur == rec then return {1} end
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
local ver = redis.call('INCR', KEYS[3])
redis.call(ARGV[6], ARGV[5], '+' .. ver .. '|' .. sid .. '|' .. rec)
return {0}
`)

// leaveScript removes ARGV sid from the office, if it is there and, when
// ARGV[2] is not empty, held by that node. It returns the removed record,
// or false.
var leaveScript = redis.NewScript(`
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if not rec then return false end
local role, node, name = string.match(rec, '^([^|]*)|([^|]*)|[^|]*|(.*)$')
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

// sweepScript removes every member held by node ARGV[1] and publishes a
// departure for each, marked '!' (a sweep: the member's node is dead, so
// no answer will come from it). It returns {sid, record, sid, record, ...} of the
// removed members. Running it twice removes nothing the second time, so
// any number of nodes may sweep the same dead node.
var sweepScript = redis.NewScript(`
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local sid, rec = all[i], all[i+1]
  local role, node, name = string.match(rec, '^([^|]*)|([^|]*)|[^|]*|(.*)$')
  if node == ARGV[1] then
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
