package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keelmesh/keel/sim"
)

func writeConfig(t *testing.T, path, simURL string, models ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  shutdown_timeout: 1s\nrequest_log:\n  enabled: false\nproviders:\n  - name: sim\n    type: anthropic\n    base_url: %s\nmodels:\n", simURL)
	for _, m := range models {
		fmt.Fprintf(&b, "  - name: %s\n    endpoints:\n      - {provider: sim, region: us-east, base_url: %s/r/us-east}\n", m, simURL)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func modelIDs(t *testing.T, addr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Data []struct{ ID string } }
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// keel serve --config: SIGHUP reloads the file without a restart, a bad
// file keeps the old config, and a cancelled context drains and returns.
func TestServeReloadAndShutdown(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fleet.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfgPath := filepath.Join(t.TempDir(), "keel.yaml")
	writeConfig(t, cfgPath, srv.URL(), "sim-haiku")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	logs := &lockedBuffer{}
	go func() { done <- runServe(ctx, cfgPath, "127.0.0.1:0", true, logs, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	}
	if got := strings.Join(modelIDs(t, addr), ","); got != "sim-haiku" {
		t.Fatalf("models %s", got)
	}
	waitModels := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for strings.Join(modelIDs(t, addr), ",") != want {
			if time.Now().After(deadline) {
				t.Fatalf("models %v, want %s after SIGHUP", modelIDs(t, addr), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	writeConfig(t, cfgPath, srv.URL(), "sim-haiku", "sim-opus")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitModels("sim-haiku,sim-opus")

	// A broken file: the previous config keeps serving.
	os.WriteFile(cfgPath, []byte("providers: [\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "config reload failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload failure logged:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := strings.Join(modelIDs(t, addr), ","); got != "sim-haiku,sim-opus" {
		t.Fatalf("after a bad reload: %s", got)
	}
	resp, err := http.Post("http://"+addr+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"sim-opus","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("call after reload: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not drain and return")
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
