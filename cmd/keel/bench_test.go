package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// execute runs the keel command line in-process.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := rootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

// TestBenchBadInput checks that bad input is a one-line error naming the
// problem, with exit code 2.
func TestBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	malformed := filepath.Join(dir, "broken.yaml")
	os.WriteFile(malformed, []byte("load: {rate: 10, duration: 5s}\ntimeline:\n  - {at: 1s, region_dwn: us-east}\n"), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown scenario", []string{"bench", "--scenario", "hurricane"}, []string{`unknown scenario "hurricane"`, "region-outage"}},
		{"malformed scenario file", []string{"bench", "--scenario", malformed}, []string{"scenario " + malformed, "region_dwn"}},
		{"missing scenario file", []string{"bench", "--scenario", filepath.Join(dir, "none.yaml")}, []string{"none.yaml", "no such file"}},
		{"unreachable target", []string{"bench", "--target", "gw=" + closed, "--duration", "1s"}, []string{"target gw: unreachable", "connection refused"}},
		{"bad target URL", []string{"bench", "--target", "localhost:7878"}, []string{`--target "localhost:7878"`}},
		{"bad format", []string{"bench", "--format", "grpc", "--target", closed}, []string{`--format "grpc"`}},
		{"timeline without simulator", []string{"bench", "--scenario", "region-outage", "--target", "x=" + startDummy(t)}, []string{"--sim"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := execute(t, tt.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (error %v)", code, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

// startDummy serves 404s on loopback until the test ends: a reachable
// target that is not a simulator.
func startDummy(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// TestBenchJSON runs a short bench against the in-process simulator and
// checks the JSON it writes.
func TestBenchJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res.json")
	text, err := execute(t, "bench", "--scenario", "steady", "--duration", "1s", "--rate", "50", "--json", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Targets []struct {
			Name          string           `json:"name"`
			Requests      int64            `json:"requests"`
			Errors        int64            `json:"errors"`
			ErrorsByKind  map[string]int64 `json:"errors_by_kind"`
			P50Ms         float64          `json:"p50_ms"`
			P999Ms        float64          `json:"p999_ms"`
			Amplification float64          `json:"amplification"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Targets) != 1 {
		t.Fatalf("%d targets, want 1: %s", len(res.Targets), b)
	}
	got := res.Targets[0]
	if got.Requests != 50 || got.Errors != 0 || got.P50Ms <= 0 || got.P999Ms < got.P50Ms || got.Amplification != 1 {
		t.Errorf("result %+v, want 50 calls, no error, sane percentiles, amplification 1", got)
	}
	if !strings.Contains(text, "p99.9 ms") || !strings.Contains(text, "bench:") {
		t.Errorf("text output lacks the table or the progress lines:\n%s", text)
	}
}
