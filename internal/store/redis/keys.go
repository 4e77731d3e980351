package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/keelmesh/keel/internal/keys"
)

// Keys returns the virtual-key store and ledger of the fleet: keys.Store
// and keys.Ledger on this Redis. Its commands need no Start (they are
// plain round trips bounded by the caller's context).
//
// Layout: PREFIX+"keys" maps key id → the key as JSON (with its secret's
// hash, never the secret), PREFIX+"keys:hash" secret hash → key id;
// PREFIX+"spend:"+WINDOW key id → spend in nano-dollars (an integer, so
// sums are exact); PREFIX+"kres:"+ID the key's reservations in flight
// (fields "tok", "usd", and "r:"+RESERVATION → "TOKENS USD") with their
// deadlines in the sorted set PREFIX+"kres:"+ID+":at";
// PREFIX+"kmin:"+ID+":"+MINUTE the minute's requests and settled tokens.
func (s *Store) Keys() *KeyStore { return &KeyStore{c: s.client, p: s.prefix} }

// KeyStore is keys.Store and keys.Ledger on Redis; safe for concurrent use.
type KeyStore struct {
	c *goredis.Client
	p string
}

// Retention of the counters: a minute's for two minutes, a day's spend
// for 35 days, a month's for 400.
const (
	minuteTTL = 2 * time.Minute
	dayTTL    = 35 * 24 * time.Hour
	monthTTL  = 400 * 24 * time.Hour
)

// storedKey is a key as PREFIX+"keys" holds it: keys.Key leaves its hash
// out of JSON.
type storedKey struct {
	keys.Key
	Hash string `json:"hash"`
}

func encodeKey(k keys.Key) (string, error) {
	b, err := json.Marshal(storedKey{Key: k, Hash: k.Hash})
	return string(b), err
}

func decodeKey(v string) (keys.Key, error) {
	var sk storedKey
	if err := json.Unmarshal([]byte(v), &sk); err != nil {
		return keys.Key{}, fmt.Errorf("decoding a stored key: %w", err)
	}
	sk.Key.Hash = sk.Hash
	return sk.Key, nil
}

// putKeyScript stores ARGV[2] (a key as JSON, hash ARGV[3]) under id
// ARGV[1] in KEYS[1] and indexes it in KEYS[2], dropping the index of the
// hash it had. ARGV[4] "create" fails on an existing id,
// "update" on a missing one.
const putKeyScript = `
local old = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[4] == 'create' and old then return redis.error_reply('key id exists') end
if ARGV[4] == 'update' and not old then return 0 end
if old then
  local h = cjson.decode(old)['hash']
  if h and h ~= ARGV[3] then redis.call('HDEL', KEYS[2], h) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
return 1
`

func (s *KeyStore) put(ctx context.Context, k keys.Key, mode string) (bool, error) {
	v, err := encodeKey(k)
	if err != nil {
		return false, err
	}
	n, err := s.c.Eval(ctx, putKeyScript, []string{s.p + "keys", s.p + "keys:hash"}, k.ID, v, k.Hash, mode).Int()
	return n == 1, err
}

// CreateKey stores a new key.
func (s *KeyStore) CreateKey(ctx context.Context, k keys.Key) error {
	_, err := s.put(ctx, k, "create")
	return err
}

// UpdateKey replaces the stored key of k.ID.
func (s *KeyStore) UpdateKey(ctx context.Context, k keys.Key) error {
	ok, err := s.put(ctx, k, "update")
	if err == nil && !ok {
		return fmt.Errorf("%s: %w", k.ID, keys.ErrNotFound)
	}
	return err
}

// Keys returns every key, oldest first.
func (s *KeyStore) Keys(ctx context.Context) ([]keys.Key, error) {
	all, err := s.c.HGetAll(ctx, s.p+"keys").Result()
	if err != nil {
		return nil, err
	}
	out := make([]keys.Key, 0, len(all))
	for _, v := range all {
		k, err := decodeKey(v)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b keys.Key) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// KeyByHash returns the key whose secret hashes to hash.
func (s *KeyStore) KeyByHash(ctx context.Context, hash string) (keys.Key, bool, error) {
	id, err := s.c.HGet(ctx, s.p+"keys:hash", hash).Result()
	if err == goredis.Nil {
		return keys.Key{}, false, nil
	} else if err != nil {
		return keys.Key{}, false, err
	}
	v, err := s.c.HGet(ctx, s.p+"keys", id).Result()
	if err == goredis.Nil {
		return keys.Key{}, false, nil
	} else if err != nil {
		return keys.Key{}, false, err
	}
	k, err := decodeKey(v)
	return k, err == nil, err
}

func (s *KeyStore) spendKey(window string) string { return s.p + "spend:" + window }

func windowTTL(window string) time.Duration {
	if strings.HasPrefix(window, "month:") {
		return monthTTL
	}
	return dayTTL
}

// AddSpend adds each amount to its key's window, in one round trip.
func (s *KeyStore) AddSpend(ctx context.Context, spend []keys.Spend) error {
	_, err := s.c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		for _, sp := range spend {
			k := s.spendKey(sp.Window)
			p.HIncrBy(ctx, k, sp.KeyID, int64(sp.USD*1e9+0.5))
			p.Expire(ctx, k, windowTTL(sp.Window))
		}
		return nil
	})
	return err
}

// SpendIn returns each key's spend in window.
func (s *KeyStore) SpendIn(ctx context.Context, window string) (map[string]float64, error) {
	all, err := s.c.HGetAll(ctx, s.spendKey(window)).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(all))
	for id, v := range all {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("spend of %s in %s: %w", id, window, err)
		}
		out[id] = float64(n) / 1e9
	}
	return out, nil
}

// lapseScript (the start of reserveScript and settleScript) defines
// release, which gives back reservation r of KEYS[1] (deadlines in
// KEYS[2]) if it is still held, and releases those whose deadline is
// before ARGV[1] ms.
const lapseScript = `
local function release(r)
  local v = redis.call('HGET', KEYS[1], 'r:' .. r)
  if v then
    local t, u = string.match(v, '(%-?%d+) (%-?%d+)')
    redis.call('HINCRBY', KEYS[1], 'tok', -tonumber(t))
    redis.call('HINCRBY', KEYS[1], 'usd', -tonumber(u))
    redis.call('HDEL', KEYS[1], 'r:' .. r)
  end
  redis.call('ZREM', KEYS[2], r)
end
for _, r in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[1]))) do
  release(r)
end
`

// reserveScript is keys.Manager's test on the fleet's counters, and the
// reservation when it passes, in one atomic step. KEYS: reservations,
// their deadlines, the minute's counters, the day's and the month's
// spend. ARGV: now ms, key id, reservation id, deadline ms, tokens,
// nano-dollars, rpm, tpm, daily and monthly budgets in nano-dollars (0:
// none). It returns {admitted, reqs, tokens, reserved tokens, day spend,
// month spend, reserved nano-dollars}, the counters before the
// reservation.
const reserveScript = lapseScript + `
local id, rid = ARGV[2], ARGV[3]
local tok, usd = tonumber(ARGV[5]), tonumber(ARGV[6])
local rpm, tpm, dlim, mlim = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local reqs = tonumber(redis.call('HGET', KEYS[3], 'reqs') or 0)
local used = tonumber(redis.call('HGET', KEYS[3], 'tokens') or 0)
local rtok = tonumber(redis.call('HGET', KEYS[1], 'tok') or 0)
local rusd = tonumber(redis.call('HGET', KEYS[1], 'usd') or 0)
local day = tonumber(redis.call('HGET', KEYS[4], id) or 0)
local month = tonumber(redis.call('HGET', KEYS[5], id) or 0)
local out = {0, reqs, used, rtok, day, month, rusd}
if rpm > 0 and reqs + 1 > rpm then return out end
if tpm > 0 and used + rtok + tok > tpm then return out end
if dlim > 0 and day + rusd + usd > dlim then return out end
if mlim > 0 and month + rusd + usd > mlim then return out end
redis.call('HINCRBY', KEYS[3], 'reqs', 1)
redis.call('PEXPIRE', KEYS[3], ARGV[11])
redis.call('HINCRBY', KEYS[1], 'tok', tok)
redis.call('HINCRBY', KEYS[1], 'usd', usd)
redis.call('HSET', KEYS[1], 'r:' .. rid, tok .. ' ' .. usd)
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), rid)
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[4]) + 60000)
redis.call('PEXPIREAT', KEYS[2], tonumber(ARGV[4]) + 60000)
out[1] = 1
return out
`

// settleScript releases reservation ARGV[2] (unless it lapsed; ARGV[1]
// is now in ms) and
// counts what the call used: ARGV[3] tokens in the minute (KEYS[3]),
// ARGV[4] nano-dollars in the day's and month's spend (KEYS[4], KEYS[5])
// of key ARGV[5]. ARGV[6..8]: the minute's, day's and month's TTL in ms.
const settleScript = lapseScript + `
release(ARGV[2])
if tonumber(ARGV[3]) ~= 0 then
  redis.call('HINCRBY', KEYS[3], 'tokens', ARGV[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[6])
end
if tonumber(ARGV[4]) ~= 0 then
  redis.call('HINCRBY', KEYS[4], ARGV[5], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
  redis.call('HINCRBY', KEYS[5], ARGV[5], ARGV[4])
  redis.call('PEXPIRE', KEYS[5], ARGV[8])
end
return 1
`

// The ledger's scripts, run by their SHA (EVALSHA; loaded on first use).
var (
	reserveLua = goredis.NewScript(reserveScript)
	settleLua  = goredis.NewScript(settleScript)
)

func (s *KeyStore) ledgerKeys(id string, minute int64, day, month string) []string {
	res := s.p + "kres:" + id
	return []string{res, res + ":at", s.p + "kmin:" + id + ":" + strconv.FormatInt(minute, 10), s.spendKey(day), s.spendKey(month)}
}

// Reserve is keys.Ledger's: the test and the reservation in one script.
func (s *KeyStore) Reserve(ctx context.Context, r keys.Reservation) (keys.Usage, error) {
	v, err := reserveLua.Run(ctx, s.c, s.ledgerKeys(r.KeyID, r.Minute, r.Day, r.Month),
		r.Now.UnixMilli(), r.KeyID, r.ID, r.Deadline.UnixMilli(), r.Tokens, r.NanoUSD,
		r.RPM, r.TPM, r.DailyNano, r.MonthlyNano, minuteTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return keys.Usage{}, fmt.Errorf("reserving for key %s: %w", r.KeyID, err)
	}
	if len(v) != 7 {
		return keys.Usage{}, fmt.Errorf("reserving for key %s: %d values from the script, want 7", r.KeyID, len(v))
	}
	return keys.Usage{Admitted: v[0] == 1, Reqs: int(v[1]), Tokens: int(v[2]), ResTokens: int(v[3]),
		DayNano: v[4], MonthNano: v[5], ResNano: v[6]}, nil
}

// Settle is keys.Ledger's. The tokens count in the minute settlement
// happens in (the call's last), the cost in the windows it was admitted
// in.
func (s *KeyStore) Settle(ctx context.Context, r keys.Reservation, now time.Time, tokens int, costNano int64) error {
	err := settleLua.Run(ctx, s.c, s.ledgerKeys(r.KeyID, now.Unix()/60, r.Day, r.Month),
		now.UnixMilli(), r.ID, tokens, costNano, r.KeyID,
		minuteTTL.Milliseconds(), dayTTL.Milliseconds(), monthTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("settling for key %s: %w", r.KeyID, err)
	}
	return nil
}

var (
	_ keys.Store  = (*KeyStore)(nil)
	_ keys.Ledger = (*KeyStore)(nil)
)
