package calstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/normalize"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func cal(id, ref, target string, created time.Time, top float64) *normalize.Calibration {
	return &normalize.Calibration{
		ID: id, Reference: ref, Target: target,
		Grid: []float64{0, 0.5, 1}, Mapped: []float64{0, top / 2, top}, Clamped: []bool{false, false, true},
		RefDiversity: []float64{0, 0.4, 0.7}, TargetGrid: []float64{0, 0.5, 1}, TargetDiversity: []float64{0, 0.7, 0.9},
		Samples: 6, Prompts: 3, CreatedAt: created,
	}
}

func TestCalibrationStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cal.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	a := cal("opus-to-haiku", "sim-opus", "sim-haiku", t0, 0.6)
	b := cal("opus-to-haiku-v2", "sim-opus", "sim-haiku", t0.Add(time.Hour), 0.5)
	c := cal("opus-to-sonnet", "sim-opus", "sim-sonnet", t0, 0.8)
	for _, x := range []*normalize.Calibration{a, b, c} {
		if err := s.Save(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		load func() (*normalize.Calibration, error)
		want *normalize.Calibration
	}{
		{"by id", func() (*normalize.Calibration, error) { return s.Load(ctx, "opus-to-haiku") }, a},
		{"by pair, newest", func() (*normalize.Calibration, error) { return s.LoadPair(ctx, "sim-opus", "sim-haiku") }, b},
		{"other pair", func() (*normalize.Calibration, error) { return s.LoadPair(ctx, "sim-opus", "sim-sonnet") }, c},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.load()
			if err != nil {
				t.Fatal(err)
			}
			if !got.CreatedAt.Equal(tc.want.CreatedAt) {
				t.Errorf("created %v, want %v", got.CreatedAt, tc.want.CreatedAt)
			}
			got.CreatedAt = tc.want.CreatedAt
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("round trip (-got +want):\n%+v\n%+v", got, tc.want)
			}
		})
	}
	if _, err := s.Load(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(nope) = %v", err)
	}
	if _, err := s.LoadPair(ctx, "sim-haiku", "sim-opus"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LoadPair(reverse) = %v", err)
	}
	// Saving an id again replaces it.
	a2 := cal("opus-to-haiku", "sim-opus", "sim-haiku", t0.Add(2*time.Hour), 0.3)
	if err := s.Save(ctx, a2); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadPair(ctx, "sim-opus", "sim-haiku"); got == nil || got.Mapped[2] != 0.3 {
		t.Errorf("after replacing, the pair's newest is %+v", got)
	}
	if err := s.Save(ctx, &normalize.Calibration{ID: "bad", Grid: []float64{0, 1}, Mapped: []float64{1, 0}}); !errors.Is(err, normalize.ErrBadCalibration) {
		t.Errorf("Save(invalid) = %v", err)
	}
	if err := s.Save(ctx, &normalize.Calibration{Grid: []float64{0, 1}, Mapped: []float64{0, 1}}); err == nil {
		t.Errorf("Save without an id succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, everything is there; Set indexes it for the request path.
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.All(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("All = %d, %v", len(all), err)
	}
	set, err := s.Set(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := set.Resolve("", "sim-opus", "sim-haiku"); got == nil || got.ID != "opus-to-haiku" {
		t.Errorf("Set.Resolve = %+v", got)
	}
}

// A store in a database the caller owns: Close leaves it open.
func TestCalibrationStoreSharedDB(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "shared.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(context.Background(), cal("x", "a", "b", time.Time{}, 0.5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM calibrations`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows %d, %v (db must stay open)", n, err)
	}
	got, err := s.Load(context.Background(), "x")
	if err != nil || got.CreatedAt.IsZero() {
		t.Errorf("zero CreatedAt not stamped: %+v %v", got, err)
	}
}

// Set loads every stored calibration into an immutable normalize.Set for
// the request path.
func (s *Store) Set(ctx context.Context) (*normalize.Set, error) {
	all, err := s.All(ctx)
	if err != nil {
		return nil, err
	}
	return normalize.NewSet(all...)
}

func (s *Store) one(ctx context.Context, q string, args ...any) (*normalize.Calibration, error) {
	var body string
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&body); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%v: %w", args, ErrNotFound)
		}
		return nil, fmt.Errorf("loading calibration %v: %w", args, err)
	}
	return decode(body)
}

// LoadPair returns the newest calibration from reference to target.
func (s *Store) LoadPair(ctx context.Context, reference, target string) (*normalize.Calibration, error) {
	return s.one(ctx, `SELECT body FROM calibrations WHERE reference = ? AND target = ? ORDER BY created_at DESC, calibration_id DESC LIMIT 1`, reference, target)
}

// Load returns the calibration stored under id.
func (s *Store) Load(ctx context.Context, id string) (*normalize.Calibration, error) {
	return s.one(ctx, `SELECT body FROM calibrations WHERE calibration_id = ?`, id)
}

// ErrNotFound is returned by Load and LoadPair when no calibration matches.
var ErrNotFound = errors.New("calibration not found")
