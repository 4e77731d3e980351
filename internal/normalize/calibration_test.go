package normalize

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// curve samples diversity d(T) = 1 − (1 − min(1, s·T/2))² over temps: the
// simulator's curve for a model of temperature scale s.
func curve(temps []float64, s float64, noise float64, r *rand.Rand) map[float64]float64 {
	out := map[float64]float64{}
	for _, t := range temps {
		p := min(1, s*t/2)
		d := 1 - (1-p)*(1-p)
		if noise > 0 && t > 0 {
			d += noise * (r.Float64()*2 - 1)
		}
		out[t] = d
	}
	return out
}

var grid11 = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

func TestCalibrationFitRecoversScale(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name         string
		refScale     float64
		targetScale  float64
		noise        float64
		tol          float64
		wantClampedN int // grid points beyond the target's range
	}{
		{"identity", 1, 1, 0, 0.01, 0},
		{"target more sensitive (B at 0.3 = A at 0.7)", 1, 7.0 / 3, 0, 0.02, 0},
		{"noisy", 1, 7.0 / 3, 0.01, 0.04, 0},
		{"target less sensitive clamps", 7.0 / 3, 1, 0, 0.02, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Fit(grid11, curve(grid11, tc.refScale, tc.noise, r), curve(grid11, tc.targetScale, tc.noise, r))
			if err != nil {
				t.Fatal(err)
			}
			clamped := 0
			for i, g := range grid11 {
				if i > 0 && c.Mapped[i] < c.Mapped[i-1] {
					t.Errorf("not monotone at %g: %g after %g", g, c.Mapped[i], c.Mapped[i-1])
				}
				if c.Clamped[i] {
					clamped++
					continue
				}
				if want := g * tc.refScale / tc.targetScale; math.Abs(c.Mapped[i]-want) > tc.tol {
					t.Errorf("T=%g maps to %.3f, want %.3f ± %g", g, c.Mapped[i], want, tc.tol)
				}
			}
			if clamped != tc.wantClampedN {
				t.Errorf("%d clamped points (%v), want %d", clamped, c.Clamped, tc.wantClampedN)
			}
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// Noise that makes the measured curves go backwards is smoothed away: the
// map stays monotone and close to the truth.
func TestCalibrationFitIsotonic(t *testing.T) {
	ref := curve(grid11, 1, 0, nil)
	tgt := curve(grid11, 2, 0, nil)
	// Make both curves dip.
	ref[0.5], ref[0.6] = ref[0.6]+0.02, ref[0.5]-0.02
	tgt[0.3], tgt[0.4] = tgt[0.4]+0.03, tgt[0.3]-0.03
	c, err := Fit(grid11, ref, tgt)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(grid11); i++ {
		if c.Mapped[i] < c.Mapped[i-1] {
			t.Errorf("not monotone: %v", c.Mapped)
		}
	}
	for i, g := range grid11 {
		if math.Abs(c.Mapped[i]-g/2) > 0.06 {
			t.Errorf("T=%g maps to %.3f, want about %.3f", g, c.Mapped[i], g/2)
		}
	}
}

func TestCalibrationIsotonic(t *testing.T) {
	cases := []struct {
		name   string
		x, y   []float64
		wx, wy []float64
	}{
		{"already increasing", []float64{0, 1, 2}, []float64{1, 2, 3}, []float64{0, 1, 2}, []float64{1, 2, 3}},
		{"one violation pooled", []float64{0, 1, 2, 3}, []float64{1, 3, 2, 4}, []float64{0, 1.5, 3}, []float64{1, 2.5, 4}},
		{"flat pooled", []float64{0, 1, 2}, []float64{0, 0, 1}, []float64{0.5, 2}, []float64{0, 1}},
		{"all decreasing", []float64{0, 1, 2}, []float64{3, 2, 1}, []float64{1}, []float64{2}},
		{"cascade", []float64{0, 1, 2, 3}, []float64{1, 5, 4, 0}, []float64{0, 2}, []float64{1, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gx, gy := Isotonic(tc.x, tc.y)
			if !reflect.DeepEqual(gx, tc.wx) || !reflect.DeepEqual(gy, tc.wy) {
				t.Errorf("Isotonic (-got +want):\n%v %v\n%v %v", gx, gy, tc.wx, tc.wy)
			}
		})
	}
}

func TestCalibrationFitErrors(t *testing.T) {
	ok := curve(grid11, 1, 0, nil)
	cases := []struct {
		name     string
		grid     []float64
		ref, tgt map[float64]float64
		want     error
	}{
		{"one point", []float64{0.5}, ok, ok, ErrBadGrid},
		{"not increasing", []float64{0, 0.5, 0.5}, ok, ok, ErrBadGrid},
		{"negative", []float64{-0.1, 0.5}, ok, ok, ErrBadGrid},
		{"NaN", []float64{0, math.NaN()}, ok, ok, ErrBadGrid},
		{"reference missing a point", []float64{0, 0.15}, ok, ok, ErrMissingDiversity},
		{"target of one point", []float64{0, 0.1}, ok, map[float64]float64{0: 0}, ErrBadGrid},
		{"NaN diversity", []float64{0, 0.1}, map[float64]float64{0: 0, 0.1: math.NaN()}, ok, ErrMissingDiversity},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Fit(tc.grid, tc.ref, tc.tgt); !errors.Is(err, tc.want) {
				t.Errorf("Fit = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCalibrationApply(t *testing.T) {
	c := &Calibration{Grid: []float64{0, 0.5, 1}, Mapped: []float64{0, 0.2, 0.6}}
	cases := []struct {
		name       string
		cal        *Calibration
		in         float64
		out, delta float64
	}{
		{"grid point", c, 0.5, 0.2, -0.3},
		{"between", c, 0.75, 0.4, -0.35},
		{"start", c, 0, 0, 0},
		{"beyond the end keeps the end offset", c, 1.4, 1, -0.4},
		{"never negative", &Calibration{Grid: []float64{0.2, 1}, Mapped: []float64{0, 0.5}}, 0.1, 0, -0.1},
		{"nil is the identity", nil, 0.7, 0.7, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, delta := tc.cal.Apply(tc.in)
			if math.Abs(out-tc.out) > 1e-12 || math.Abs(delta-tc.delta) > 1e-12 {
				t.Errorf("Apply(%g) = %g, %g; want %g, %g", tc.in, out, delta, tc.out, tc.delta)
			}
		})
	}
	if got := FormatOffset(-0.4); got != "-0.400" {
		t.Errorf("FormatOffset(-0.4) = %q", got)
	}
	if got := FormatOffset(0.00001); got != "+0.000" {
		t.Errorf("FormatOffset(0.00001) = %q", got)
	}
	if got := FormatOffset(0.125); got != "+0.125" {
		t.Errorf("FormatOffset(0.125) = %q", got)
	}
}

func TestCalibrationParseGrid(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []float64
		err  bool
	}{
		{"list", "0, 0.3,0.7", []float64{0, 0.3, 0.7}, false},
		{"ellipsis", "0,0.25,...,1", []float64{0, 0.25, 0.5, 0.75, 1}, false},
		{"range", "0:1:0.1", grid11, false},
		{"not a number", "0,a", nil, true},
		{"decreasing", "1,0.5", nil, true},
		{"one point", "0.5", nil, true},
		{"zero step", "0:1:0", nil, true},
		{"empty", "", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseGrid(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("ParseGrid(%q) error %v, want error %v", tc.in, err, tc.err)
			}
			if !tc.err && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseGrid(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestCalibrationDiversity(t *testing.T) {
	cases := []struct {
		name    string
		samples [][]string
		want    float64
	}{
		{"identical", [][]string{{"a", "b", "c"}, {"a", "b", "c"}}, 0},
		{"disjoint", [][]string{{"a", "b"}, {"c", "d"}}, 1},
		{"one substitution in four", [][]string{{"a", "b", "c", "d"}, {"a", "x", "c", "d"}}, 0.25},
		{"insertion", [][]string{{"a", "b", "c"}, {"a", "b", "x", "c"}}, 0.25},
		{"three samples", [][]string{{"a", "b"}, {"a", "b"}, {"a", "x"}}, 1.0 / 3},
		{"single sample", [][]string{{"a"}}, 0},
		{"empty answers", [][]string{{}, {}}, 0},
		{"one empty", [][]string{{}, {"a", "b"}}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diversity(tc.samples); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Diversity = %g, want %g", got, tc.want)
			}
		})
	}
	if got := Tokens("The router, the Queue!  and — 42."); !reflect.DeepEqual(got, []string{"the", "router", "the", "queue", "and", "42"}) {
		t.Errorf("Tokens = %q", got)
	}
	if got := MeanDiversity([][][]string{{{"a"}, {"a"}}, {{"a"}, {"b"}}}); got != 0.5 {
		t.Errorf("MeanDiversity = %g", got)
	}
}

func TestCalibrationSetResolve(t *testing.T) {
	old := &Calibration{ID: "a-b-old", Reference: "a", Target: "b", Grid: []float64{0, 1}, Mapped: []float64{0, 0.5}}
	cur := &Calibration{ID: "a-b", Reference: "a", Target: "b", Grid: []float64{0, 1}, Mapped: []float64{0, 0.4}}
	cur.CreatedAt = old.CreatedAt.Add(1)
	ac := &Calibration{ID: "a-c", Reference: "a", Target: "c", Grid: []float64{0, 1}, Mapped: []float64{0, 0.8}}
	s, err := NewSet(old, cur, ac)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                 string
		id, requested, serve string
		want                 *Calibration
		err                  error
	}{
		{"same model, no id", "", "a", "a", nil, nil},
		{"fallback uses the newest pair", "", "a", "b", cur, nil},
		{"no calibration for the pair", "", "b", "a", nil, nil},
		{"named id on its target", "a-b-old", "a", "b", old, nil},
		{"named id, alias moved to its target", "a-b-old", "b", "b", old, nil},
		{"named id, other serving model uses its reference's pair", "a-b", "a", "c", ac, nil},
		{"named id, served by its reference", "a-b", "a", "a", nil, nil},
		{"unknown id", "nope", "a", "b", nil, ErrUnknownCalibration},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Resolve(tc.id, tc.requested, tc.serve)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Errorf("Resolve = %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
	if _, err := NewSet(&Calibration{ID: "bad", Grid: []float64{0, 1}, Mapped: []float64{0.5, 0.1}}); !errors.Is(err, ErrBadCalibration) {
		t.Errorf("NewSet of a decreasing map: %v", err)
	}
	var none *Set
	if c, err := none.Resolve("", "a", "b"); c != nil || err != nil {
		t.Errorf("nil set: %v %v", c, err)
	}
}
