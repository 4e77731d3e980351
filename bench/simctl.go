package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/keelmesh/keel/sim"
)

// Sim controls the simulator a run plays its timeline on and reads its
// counters for amplification and cost. Implementations must be safe for
// concurrent use.
type Sim interface {
	SetRegionDown(ctx context.Context, region string, down bool) error
	SetFaults(ctx context.Context, faults []sim.Fault) error
	Stats(ctx context.Context) (sim.Stats, error)
}

// FleetSim is an in-process simulator.
type FleetSim struct{ Fleet *sim.Fleet }

// SetRegionDown implements Sim.
func (s FleetSim) SetRegionDown(_ context.Context, region string, down bool) error {
	return s.Fleet.SetRegionDown(region, down)
}

// SetFaults implements Sim.
func (s FleetSim) SetFaults(_ context.Context, faults []sim.Fault) error {
	return s.Fleet.SetFaults(faults)
}

// Stats implements Sim.
func (s FleetSim) Stats(context.Context) (sim.Stats, error) { return s.Fleet.Stats(), nil }

// Prices returns the fleet's price table, by model.
func (s FleetSim) Prices() map[string]sim.Price {
	out := map[string]sim.Price{}
	for _, m := range s.Fleet.Models() {
		out[m.Name] = m.Price
	}
	return out
}

// HTTPSim is a simulator reached over its control API (`keel sim`):
// POST /sim/regions/{name}/down|up, POST /sim/faults, GET /sim/stats.
type HTTPSim struct {
	// Base is the simulator's root URL, e.g. http://127.0.0.1:7879.
	Base   string
	Client *http.Client // nil: a client with a 5s timeout
}

func (s HTTPSim) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return &http.Client{Timeout: 5 * time.Second}
}

func (s HTTPSim) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(s.Base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// SetRegionDown implements Sim.
func (s HTTPSim) SetRegionDown(ctx context.Context, region string, down bool) error {
	verb := "up"
	if down {
		verb = "down"
	}
	_, err := s.do(ctx, http.MethodPost, "/sim/regions/"+region+"/"+verb, nil)
	return err
}

// SetFaults implements Sim.
func (s HTTPSim) SetFaults(ctx context.Context, faults []sim.Fault) error {
	if faults == nil {
		faults = []sim.Fault{}
	}
	b, err := json.Marshal(faults)
	if err != nil {
		return err
	}
	_, err = s.do(ctx, http.MethodPost, "/sim/faults", b)
	return err
}

// Stats implements Sim.
func (s HTTPSim) Stats(ctx context.Context) (sim.Stats, error) {
	var st sim.Stats
	b, err := s.do(ctx, http.MethodGet, "/sim/stats", nil)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("GET /sim/stats: %w", err)
	}
	return st, nil
}

// DetectSim reports whether base answers GET /sim/stats like a simulator.
func DetectSim(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := HTTPSim{Base: SimRoot(base)}.Stats(ctx)
	return err == nil
}

// SimRoot strips an API path or region prefix from a simulator URL.
func SimRoot(u string) string {
	u = strings.TrimRight(u, "/")
	for _, suf := range []string{"/v1/messages", "/v1/chat/completions", "/v1"} {
		u = strings.TrimSuffix(u, suf)
	}
	if i := strings.Index(u, "/r/"); i >= 0 {
		u = u[:i]
	}
	return u
}
