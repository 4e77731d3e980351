package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelmesh/keel/internal/normalize"
)

// shareScript writes each calibration of ARGV (triples: id, creation stamp,
// JSON) into the hash KEYS[1] unless the fleet already holds one of that id
// created at the same time or later (stamps in KEYS[2], fixed-width
// strings, so string order is time order), then returns all of KEYS[1].
// One round trip, and atomic: two replicas starting together cannot
// replace a newer calibration with an older one.
const shareScript = `
for i = 1, #ARGV, 3 do
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  if not cur or ARGV[i+1] > cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i+2])
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i+1])
  end
end
return redis.call('HGETALL', KEYS[1])
`

// ShareCalibrations publishes this replica's calibrations to the fleet and
// returns every calibration the fleet holds. The fleet's are in the hash
// PREFIX+"calibrations" (calibration id → the calibration as JSON, as
// calstore stores it) with their creation times in
// PREFIX+"calibrations:at"; neither expires. For one id the calibration
// created last is kept: an older local one does not replace it, and is
// not returned. Calibrations without an id are not published.
//
// It is one round trip, bounded by the store's timeout, meant for start
// and reload (never a call's path); with Redis unreachable it returns the
// error and nothing. A stored entry that does not decode or validate is
// skipped and logged. It needs no Start and does not change Up.
func (s *Store) ShareCalibrations(ctx context.Context, local []*normalize.Calibration) ([]*normalize.Calibration, error) {
	args := make([]any, 0, 3*len(local))
	for _, c := range local {
		if c.ID == "" {
			continue
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encoding calibration %q: %w", c.ID, err)
		}
		args = append(args, c.ID, stamp(c.CreatedAt), b)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := s.prefix + "calibrations"
	kv, err := s.client.Eval(ctx, shareScript, []string{key, key + ":at"}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("sharing calibrations: %w", err)
	}
	out := make([]*normalize.Calibration, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		id := kv[i]
		var c normalize.Calibration
		if err := json.Unmarshal([]byte(kv[i+1]), &c); err != nil {
			s.log.Warn("shared calibrations: skipping an entry that does not decode", "key", key, "id", id, "err", err)
			continue
		}
		if c.ID != id {
			s.log.Warn("shared calibrations: skipping an entry whose id is not its field", "key", key, "field", id, "id", c.ID)
			continue
		}
		if err := c.Validate(); err != nil {
			s.log.Warn("shared calibrations: skipping an invalid entry", "key", key, "id", id, "err", err)
			continue
		}
		out = append(out, &c)
	}
	return out, nil
}

// stamp is t as 20 decimal digits of Unix nanoseconds, so that comparing
// two stamps as strings compares the times; a zero or pre-1970 time is 0.
func stamp(t time.Time) string {
	var n int64
	if !t.IsZero() && t.After(time.Unix(0, 0)) {
		n = t.UnixNano()
	}
	return fmt.Sprintf("%020d", n)
}
