package normalize

import (
	"errors"
	"fmt"
)

// ErrUnknownCalibration is returned by Set.Resolve for a calibration_id the
// set does not hold.
var ErrUnknownCalibration = errors.New("unknown calibration_id")

// Set indexes calibrations by ID and by (reference, target) pair, for the
// request path: lookups are map reads, no I/O. Build a new Set to change it
// (calstore.Store.Set loads one); a Set is immutable and safe for concurrent
// use. The nil *Set holds nothing.
type Set struct {
	byID   map[string]*Calibration
	byPair map[[2]string]*Calibration
}

// NewSet indexes cals; for an ID or a pair given twice the one created
// last wins (the later argument on a tie). Invalid calibrations are an error.
func NewSet(cals ...*Calibration) (*Set, error) {
	s := &Set{byID: map[string]*Calibration{}, byPair: map[[2]string]*Calibration{}}
	newer := func(old, c *Calibration) bool { return old == nil || !c.CreatedAt.Before(old.CreatedAt) }
	for _, c := range cals {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("calibration %q: %w", c.ID, err)
		}
		if c.ID != "" && newer(s.byID[c.ID], c) {
			s.byID[c.ID] = c
		}
		k := [2]string{c.Reference, c.Target}
		if newer(s.byPair[k], c) {
			s.byPair[k] = c
		}
	}
	return s, nil
}

// Len is the number of calibrations by ID.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byID)
}

// ByID returns the calibration named id.
func (s *Set) ByID(id string) (*Calibration, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.byID[id]
	return c, ok
}

// ForPair returns the newest calibration from reference to target.
func (s *Set) ForPair(reference, target string) (*Calibration, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.byPair[[2]string{reference, target}]
	return c, ok
}

// Resolve picks the calibration for a request that asked for model
// requested (and optionally named calibration id) and is served by model
// serving. With an id (the caller says it tuned for that calibration's
// reference model): that calibration when its target is serving (also when
// serving is the model the caller named: an alias moved to a new version),
// else the newest one from its reference to serving, else none; an id the
// set does not hold is ErrUnknownCalibration. Without an id: none when
// serving is requested, else the newest calibration from requested to
// serving, else none.
func (s *Set) Resolve(id, requested, serving string) (*Calibration, error) {
	if id != "" {
		c, ok := s.ByID(id)
		if !ok {
			return nil, fmt.Errorf("%q: %w", id, ErrUnknownCalibration)
		}
		if c.Target == serving {
			return c, nil
		}
		if p, ok := s.ForPair(c.Reference, serving); ok {
			return p, nil
		}
		return nil, nil
	}
	if requested == serving {
		return nil, nil
	}
	c, _ := s.ForPair(requested, serving)
	return c, nil
}
