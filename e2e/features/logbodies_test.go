package features_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
	_ "modernc.org/sqlite"
)

// request_log.log_bodies stores each call's request and answer in the
// client's wire format (they were never written: nothing supplied them);
// without it no body is stored.
func TestRequestLogStoresBodiesOnlyWithLogBodies(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "log_bodies", false: "default"}[on], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.db")
			s := newSimMesh(t, sim.DefaultConfig(), func(c *config.Config) {
				yes := true
				c.RequestLog = config.RequestLog{Enabled: &yes, Path: path, LogBodies: on}
			})
			if r := s.call(t, "/v1/messages", msgBody("sim-sonnet", "the bodies question", ""), "anthropic-version", "2023-06-01"); r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if err := s.mesh.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rows, err := db.Query(`SELECT prompt, answer FROM bodies`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var prompt, answer string
				if err := rows.Scan(&prompt, &answer); err != nil {
					t.Fatal(err)
				}
				n++
				if !strings.Contains(prompt, `"the bodies question"`) || !strings.Contains(prompt, `"model":"sim-sonnet"`) {
					t.Errorf("stored prompt %q lacks the request", prompt)
				}
				if !strings.Contains(answer, `"type":"message"`) || !strings.Contains(answer, `"content"`) {
					t.Errorf("stored answer %q is not the Anthropic answer", answer)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[on]; n != want {
				t.Errorf("%d bodies rows, want %d", n, want)
			}
		})
	}
}
