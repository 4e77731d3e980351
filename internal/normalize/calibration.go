package normalize

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Calibration maps a temperature asked of the Reference model to the Target
// model's temperature of equal output diversity: a monotone (non-decreasing)
// piecewise-linear function through the points (Grid[i], Mapped[i]). It is
// plain data; treat a Calibration as immutable once built (Apply only reads
// it, so it is safe for concurrent use).
type Calibration struct {
	// ID is the calibration_id requests may name.
	ID        string `json:"id"`
	Reference string `json:"reference"`
	Target    string `json:"target"`
	// Grid holds the reference temperatures, strictly increasing; Mapped the
	// target temperatures, non-decreasing, one per grid point.
	Grid   []float64 `json:"grid"`
	Mapped []float64 `json:"mapped"`
	// Clamped marks grid points whose reference diversity lies outside the
	// range the target reached over its sampled temperatures: there the
	// mapping is pinned to the end of that range and not identified.
	Clamped []bool `json:"clamped"`
	// RefDiversity (per grid point) and TargetDiversity (per TargetGrid
	// point) are the measured diversities the fit used, before smoothing.
	RefDiversity    []float64 `json:"ref_diversity,omitempty"`
	TargetGrid      []float64 `json:"target_grid,omitempty"`
	TargetDiversity []float64 `json:"target_diversity,omitempty"`
	// Samples and Prompts record how the diversities were measured.
	Samples   int       `json:"samples,omitempty"`
	Prompts   int       `json:"prompts,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Errors of Fit and Validate.
var (
	ErrBadGrid          = errors.New("bad temperature grid")
	ErrMissingDiversity = errors.New("missing diversity measurement")
	ErrBadCalibration   = errors.New("bad calibration")
)

// Apply returns the serving temperature for the requested temperature t and
// the offset (serving − requested). Inside the grid it interpolates
// linearly; beyond either end it keeps the offset of that end; the result is
// never negative. A nil Calibration is the identity.
func (c *Calibration) Apply(t float64) (float64, float64) {
	if c == nil || len(c.Grid) == 0 || math.IsNaN(t) {
		return t, 0
	}
	g, m := c.Grid, c.Mapped
	var out float64
	switch n := len(g); {
	case t <= g[0]:
		out = t + (m[0] - g[0])
	case t >= g[n-1]:
		out = t + (m[n-1] - g[n-1])
	default:
		i, _ := slices.BinarySearch(g, t) // g[i-1] < t <= g[i]
		f := (t - g[i-1]) / (g[i] - g[i-1])
		out = m[i-1] + f*(m[i]-m[i-1])
	}
	out = max(out, 0)
	return out, out - t
}

// Offsets returns Mapped[i] − Grid[i] per grid point.
func (c *Calibration) Offsets() []float64 {
	out := make([]float64, len(c.Grid))
	for i := range c.Grid {
		out[i] = c.Mapped[i] - c.Grid[i]
	}
	return out
}

// Validate reports whether c is usable: a strictly increasing grid of
// finite temperatures ≥ 0 with one non-decreasing mapped value each.
func (c *Calibration) Validate() error {
	if err := checkGrid(c.Grid); err != nil {
		return err
	}
	if len(c.Mapped) != len(c.Grid) || len(c.Clamped) != 0 && len(c.Clamped) != len(c.Grid) {
		return fmt.Errorf("%w: %d grid points, %d mapped, %d clamped", ErrBadCalibration, len(c.Grid), len(c.Mapped), len(c.Clamped))
	}
	for i, v := range c.Mapped {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || i > 0 && v < c.Mapped[i-1] {
			return fmt.Errorf("%w: mapped temperatures must be finite, ≥ 0 and non-decreasing (at %g)", ErrBadCalibration, c.Grid[i])
		}
	}
	return nil
}

// checkGrid accepts at least two finite, non-negative, strictly increasing
// temperatures.
func checkGrid(g []float64) error {
	if len(g) < 2 {
		return fmt.Errorf("%w: need at least 2 temperatures, have %d", ErrBadGrid, len(g))
	}
	for i, v := range g {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: %g is not a temperature ≥ 0", ErrBadGrid, v)
		}
		if i > 0 && v <= g[i-1] {
			return fmt.Errorf("%w: temperatures must increase (%g after %g)", ErrBadGrid, v, g[i-1])
		}
	}
	return nil
}

// ParseGrid reads a temperature grid: a comma-separated list ("0,0.3,0.5"),
// an arithmetic list written "0,0.1,...,1", or "START:STOP:STEP"
// ("0:1:0.1"); it checks the result as Fit does.
func ParseGrid(s string) ([]float64, error) {
	num := func(p string) (float64, error) {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q is not a number", ErrBadGrid, strings.TrimSpace(p))
		}
		return f, nil
	}
	var g []float64
	parts := strings.Split(s, ",")
	if r := strings.Split(s, ":"); len(r) == 3 && len(parts) == 1 {
		parts = r
	}
	switch {
	case len(parts) == 3 && strings.Contains(s, ":"), len(parts) == 4 && strings.TrimSpace(parts[2]) == "...":
		var a, b, c float64
		var err error
		if a, err = num(parts[0]); err != nil {
			return nil, err
		}
		if len(parts) == 3 {
			if b, err = num(parts[1]); err != nil {
				return nil, err
			}
			if c, err = num(parts[2]); err != nil {
				return nil, err
			}
		} else {
			var second float64
			if second, err = num(parts[1]); err != nil {
				return nil, err
			}
			if b, err = num(parts[3]); err != nil {
				return nil, err
			}
			c = second - a
		}
		if !(c > 0) || (b-a)/c > 1000 {
			return nil, fmt.Errorf("%w: %q: the step must be positive and give at most 1000 points", ErrBadGrid, s)
		}
		for i := 0; ; i++ {
			t := math.Round((a+float64(i)*c)*1e9) / 1e9
			if t > b+1e-9 {
				break
			}
			g = append(g, t)
		}
	default:
		for _, p := range parts {
			f, err := num(p)
			if err != nil {
				return nil, err
			}
			g = append(g, f)
		}
	}
	if err := checkGrid(g); err != nil {
		return nil, err
	}
	return g, nil
}

// Fit finds, for each reference temperature of grid, the target temperature
// whose diversity equals the reference's. refDiversity must hold a value for
// every grid point; targetDiversity holds the target's diversity at the
// temperatures it was sampled at (usually the same grid), at least two.
//
// Both curves are first made non-decreasing by isotonic regression (pool
// adjacent violators), each pooled block becoming one point at its mean
// temperature, so sampling noise cannot make the map go backwards or jump.
// The reference level at each grid point is then read off its smoothed
// curve and inverted through the target's by linear interpolation; levels
// outside the target's range are clamped to its end and marked Clamped. The
// result is non-decreasing; Fit fills Grid, Mapped, Clamped and the measured
// diversities, and leaves ID, names and CreatedAt to the caller.
func Fit(grid []float64, refDiversity, targetDiversity map[float64]float64) (*Calibration, error) {
	if err := checkGrid(grid); err != nil {
		return nil, err
	}
	ref := make([]float64, len(grid))
	for i, t := range grid {
		d, ok := refDiversity[t]
		if !ok {
			return nil, fmt.Errorf("%w: reference at temperature %g", ErrMissingDiversity, t)
		}
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, fmt.Errorf("%w: reference diversity %g at %g", ErrMissingDiversity, d, t)
		}
		ref[i] = d
	}
	tgrid := make([]float64, 0, len(targetDiversity))
	for t := range targetDiversity {
		tgrid = append(tgrid, t)
	}
	slices.Sort(tgrid)
	if err := checkGrid(tgrid); err != nil {
		return nil, fmt.Errorf("target temperatures: %w", err)
	}
	tdiv := make([]float64, len(tgrid))
	for i, t := range tgrid {
		d := targetDiversity[t]
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return nil, fmt.Errorf("%w: target diversity %g at %g", ErrMissingDiversity, d, t)
		}
		tdiv[i] = d
	}

	rx, ry := Isotonic(grid, ref)
	tx, ty := Isotonic(tgrid, tdiv)
	c := &Calibration{
		Grid:            slices.Clone(grid),
		Mapped:          make([]float64, len(grid)),
		Clamped:         make([]bool, len(grid)),
		RefDiversity:    ref,
		TargetGrid:      tgrid,
		TargetDiversity: tdiv,
	}
	const eps = 1e-12
	n := len(tx)
	for i, t := range grid {
		level := interp(rx, ry, t)
		var m float64
		switch {
		case level <= eps && ty[0] <= eps:
			// A deterministic reference maps to the target's lowest
			// temperature when that is deterministic too.
			m = tgrid[0]
		case level <= ty[0]:
			m = tx[0]
			c.Clamped[i] = level < ty[0]-eps
		case level >= ty[n-1]:
			m = tx[n-1]
			c.Clamped[i] = level > ty[n-1]+eps
		default:
			j, _ := slices.BinarySearch(ty, level) // ty[j-1] < level <= ty[j]
			f := (level - ty[j-1]) / (ty[j] - ty[j-1])
			m = tx[j-1] + f*(tx[j]-tx[j-1])
		}
		if i > 0 {
			m = max(m, c.Mapped[i-1])
		}
		c.Mapped[i] = m
	}
	return c, nil
}

// interp evaluates the piecewise-linear curve through (x, y) at t, flat
// beyond its ends.
func interp(x, y []float64, t float64) float64 {
	n := len(x)
	switch {
	case t <= x[0]:
		return y[0]
	case t >= x[n-1]:
		return y[n-1]
	}
	i, _ := slices.BinarySearch(x, t)
	if x[i] == t {
		return y[i]
	}
	f := (t - x[i-1]) / (x[i] - x[i-1])
	return y[i-1] + f*(y[i]-y[i-1])
}

// Isotonic returns the least-squares non-decreasing fit of y over x (pool
// adjacent violators, equal weights) as one point per pooled block: the
// block's mean x and its mean y. The returned y values strictly increase.
// x must be sorted ascending.
func Isotonic(x, y []float64) ([]float64, []float64) {
	type block struct {
		sx, sy float64
		n      int
	}
	var bs []block
	for i := range y {
		bs = append(bs, block{x[i], y[i], 1})
		for len(bs) > 1 {
			a, b := bs[len(bs)-2], bs[len(bs)-1]
			if a.sy/float64(a.n) < b.sy/float64(b.n) {
				break
			}
			bs = bs[:len(bs)-2]
			bs = append(bs, block{a.sx + b.sx, a.sy + b.sy, a.n + b.n})
		}
	}
	ox, oy := make([]float64, len(bs)), make([]float64, len(bs))
	for i, b := range bs {
		ox[i], oy[i] = b.sx/float64(b.n), b.sy/float64(b.n)
	}
	return ox, oy
}

// FormatOffset is the X-Mesh-Normalization-Offset header value of an
// applied offset: signed, three decimals ("-0.400", "+0.000").
func FormatOffset(offset float64) string {
	if math.Abs(offset) < 0.0005 {
		offset = 0
	}
	s := strconv.FormatFloat(offset, 'f', 3, 64)
	if offset >= 0 {
		s = "+" + s
	}
	return s
}
