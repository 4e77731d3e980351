package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/keelmesh/keel/internal/convstate"
)

// Conversations returns the fleet's store of the Responses API's
// conversations (convstate.Backend), enforcing b: a response one replica
// served can be continued, read or deleted through any other. Its
// commands need no Start; each is one round trip bounded by the store's
// timeout.
//
// Layout: PREFIX+"resp:"+ID is a hash {exp: expiry in Unix ms, data: the
// conversation as convstate.Encode writes it}, expiring with it; PREFIX+"resp:order" orders the ids by
// the sequence PREFIX+"resp:seq" (oldest first, for eviction),
// PREFIX+"resp:exp" by expiry, PREFIX+"resp:size" holds each one's size
// (Conversation.Size) and PREFIX+"resp:bytes" their total. A Lua script stores, expires and
// evicts in one step. It names entry keys it builds from their ids, so it
// needs a single Redis, not a cluster.
func (s *Store) Conversations(b convstate.Bounds) *Conversations {
	return &Conversations{c: s.client, p: s.prefix + "resp:", timeout: s.timeout, bounds: b}
}

// Conversations is convstate.Backend on Redis; safe for concurrent use.
type Conversations struct {
	c       *goredis.Client
	p       string
	timeout time.Duration
	bounds  convstate.Bounds
}

var _ convstate.Backend = (*Conversations)(nil)

// convDrop is the scripts' removal of one id from the entry and indexes;
// KEYS[1..4] are order, exp, size and bytes, ARGV[1] the entry prefix.
const convDrop = `
local function drop(id)
  local sz = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  redis.call('DEL', ARGV[1] .. id)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  if sz > 0 then redis.call('DECRBY', KEYS[4], sz) end
end
`

// convPutScript stores ARGV[3] (of size ARGV[9]) under id ARGV[2] (now
// ARGV[4] and expiry ARGV[5] in Unix ms, TTL ARGV[6] ms) after dropping
// the expired entries, then drops the oldest while there are more than
// ARGV[7] entries or ARGV[8] bytes (0: no bound). An entry over the byte
// bound is not kept.
var convPutLua = goredis.NewScript(convDrop + `
drop(ARGV[2])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])) do drop(id) end
local size = tonumber(ARGV[9])
local maxn, maxb = tonumber(ARGV[7]), tonumber(ARGV[8])
if tonumber(ARGV[6]) <= 0 or (maxb > 0 and size > maxb) then return 0 end
local seq = redis.call('INCR', KEYS[5])
local key = ARGV[1] .. ARGV[2]
redis.call('HSET', key, 'exp', ARGV[5], 'data', ARGV[3])
redis.call('PEXPIRE', key, ARGV[6])
redis.call('ZADD', KEYS[1], seq, ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], size)
local total = redis.call('INCRBY', KEYS[4], size)
while (maxn > 0 and redis.call('ZCARD', KEYS[1]) > maxn) or (maxb > 0 and total > maxb) do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not oldest then break end
  drop(oldest)
  total = tonumber(redis.call('GET', KEYS[4]) or '0')
end
return 1
`)

// convDeleteScript drops id ARGV[2] and returns 1 when it was there and
// not expired at ARGV[3] (Unix ms), else 0.
var convDeleteLua = goredis.NewScript(convDrop + `
local exp = tonumber(redis.call('HGET', ARGV[1] .. ARGV[2], 'exp') or '0')
drop(ARGV[2])
if exp > tonumber(ARGV[3]) then return 1 end
return 0
`)

func (c *Conversations) keys() []string {
	return []string{c.p + "order", c.p + "exp", c.p + "size", c.p + "bytes", c.p + "seq"}
}

// Put implements convstate.Backend.
func (c *Conversations) Put(ctx context.Context, id string, conv *convstate.Conversation, now, expires time.Time) error {
	data, err := convstate.Encode(conv)
	if err != nil {
		return fmt.Errorf("storing response %s in redis: %w", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err = convPutLua.Run(ctx, c.c, c.keys(), c.p, id, data, now.UnixMilli(), expires.UnixMilli(),
		expires.Sub(now).Milliseconds(), c.bounds.MaxEntries, c.bounds.MaxBytes, conv.Size()).Err()
	if err != nil {
		return fmt.Errorf("storing response %s in redis: %w", id, err)
	}
	return nil
}

// Get implements convstate.Backend.
func (c *Conversations) Get(ctx context.Context, id string, now time.Time) (*convstate.Conversation, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	vals, err := c.c.HMGet(ctx, c.p+id, "exp", "data").Result()
	if err != nil {
		return nil, fmt.Errorf("reading response %s from redis: %w", id, err)
	}
	exp, _ := vals[0].(string)
	data, _ := vals[1].(string)
	ms, perr := strconv.ParseInt(exp, 10, 64)
	if vals[0] == nil || vals[1] == nil || perr != nil || ms <= now.UnixMilli() {
		return nil, convstate.ErrNotFound
	}
	conv, err := convstate.Decode([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("reading response %s from redis: %w", id, err)
	}
	return conv, nil
}

// Delete implements convstate.Backend.
func (c *Conversations) Delete(ctx context.Context, id string, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	n, err := convDeleteLua.Run(ctx, c.c, c.keys(), c.p, id, now.UnixMilli()).Int()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return false, fmt.Errorf("deleting response %s from redis: %w", id, err)
	}
	return n == 1, nil
}
