package features_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/sim"
)

// Issue 28, items 3 and 5, end to end: through the embedded mesh over the
// simulator with prompt caching on, a coding agent's repeated system
// prompt is written to the provider's cache (1-hour TTL) and then read;
// the client gets the provider's cache counts untouched, and X-Mesh-Cost
// prices each kind at its price (reads a tenth of input, 1-hour writes 2×),
// as the fleet bills it.
func TestPromptCacheSpendThroughMesh(t *testing.T) {
	m := tieredMesh(t, func(c *sim.Config) { *c = sim.WithPromptCache(*c) }, nil)
	sys := strings.TrimSpace(strings.Repeat("You are a careful coding agent working in a large Go repository. ", 300)) // 3,600 words
	sysJSON, _ := json.Marshal(sys)
	body := `{"model":"sim-sonnet","max_tokens":50,"system":[{"type":"text","text":` + string(sysJSON) +
		`,"cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"run the tests"}]}`
	type usage struct {
		In      int `json:"input_tokens"`
		Out     int `json:"output_tokens"`
		Write   int `json:"cache_creation_input_tokens"`
		Read    int `json:"cache_read_input_tokens"`
		Created struct {
			W5m int `json:"ephemeral_5m_input_tokens"`
			W1h int `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
	}
	// sim-sonnet: $3 input, $15 output per million tokens
	for i, want := range []struct {
		read, write int
		inPrice     float64 // per million of the system prompt's tokens
	}{{0, 3600, 3 * 2}, {3600, 0, 3 * 0.1}} {
		status, h, b := postMessages(t, m, body)
		if status != http.StatusOK {
			t.Fatalf("call %d: status %d: %s", i+1, status, b)
		}
		var u usage
		if err := json.Unmarshal(mustField(b, "usage"), &u); err != nil {
			t.Fatal(err)
		}
		if u.Read != want.read || u.Write != want.write || u.Created.W1h != want.write || u.Created.W5m != 0 || u.In != 4 {
			t.Errorf("call %d: usage %+v, want %d read, %d written with the 1-hour TTL, 4 input (a message and 3 words)", i+1, u, want.read, want.write)
		}
		cost := (4*3 + 3600*want.inPrice + float64(u.Out)*15) / 1e6
		if got := h.Get("X-Mesh-Cost"); got != server.FormatCost(cost) {
			f, _ := strconv.ParseFloat(got, 64)
			t.Errorf("call %d: X-Mesh-Cost %s ($%g), want %s", i+1, got, f, server.FormatCost(cost))
		}
	}
}
