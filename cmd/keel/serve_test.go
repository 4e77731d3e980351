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

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/sim"
)

func writeConfig(t *testing.T, path, simURL string, models ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "server:\n  shutdown_timeout: 1s\n  drain_delay: 0s\nrequest_log:\n  enabled: false\nproviders:\n  - name: sim\n    type: anthropic\n    base_url: %s\nmodels:\n", simURL)
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
	// A file that serves nothing (issue 25): refused, the previous config
	// keeps serving, and the log says what to fix.
	os.WriteFile(cfgPath, []byte("server:\n  shutdown_timeout: 1s\n"), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	deadline = time.Now().Add(5 * time.Second)
	for strings.Count(logs.String(), "config reload failed") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second reload failure logged:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "providers: none configured") {
		t.Errorf("the reload failure does not name the key to fix:\n%s", logs.String())
	}
	if got := strings.Join(modelIDs(t, addr), ","); got != "sim-haiku,sim-opus" {
		t.Fatalf("after reloading a config that serves nothing: %s", got)
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

// keel serve --config with a file that serves nothing (only a server
// section) refuses to start, naming the key to fix (issue 25).
func TestServeRefusesAConfigThatServesNothing(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "k.yaml")
	if err := os.WriteFile(cfgPath, []byte("server:\n  listen: 127.0.0.1:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfgPath, "127.0.0.1:0", true, logs, ready) }()
	var err error
	select {
	case addr := <-ready:
		cancel()
		<-done
		t.Fatalf("serving at %s", addr)
	case err = <-done:
	}
	if err == nil || !strings.Contains(err.Error(), cfgPath+": providers: none configured, so this config serves no model") {
		t.Fatalf("serve: %v, want a refusal naming providers", err)
	}
	if strings.Contains(logs.String(), "serving the fleet") {
		t.Errorf("claims to serve:\n%s", logs.String())
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

// keel serve keeps its request log on by default (keel report reads it),
// unlike keel.New; request_log.enabled: false still turns it off.
func TestServeDefaults(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name string
		in   *bool
		want bool
	}{
		{name: "unset is on", in: nil, want: true},
		{name: "enabled stays on", in: &on, want: true},
		{name: "disabled stays off", in: &off, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{RequestLog: config.RequestLog{Enabled: tt.in}}
			serveDefaults(cfg)
			if got := cfg.RequestLog.On(); got != tt.want {
				t.Errorf("request log on = %v, want %v", got, tt.want)
			}
		})
	}
}

// keel serve --config with no request_log section writes keel-requests.db
// in the working directory, where keel report looks by default.
func TestServeWritesRequestLogByDefault(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfgPath := filepath.Join(dir, "keel.yaml")
	yaml := "server:\n  shutdown_timeout: 1s\n  drain_delay: 0s\nproviders:\n  - {name: a, type: openai, base_url: 'http://127.0.0.1:9/v1'}\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfgPath, "127.0.0.1:0", true, io.Discard, ready) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve ended: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, sqlite.DefaultPath)); err != nil {
		t.Errorf("keel serve wrote no request log where keel report reads it: %v", err)
	}
}
