package sim

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// TestTransportResetsAreNetOpErrors: a reset fault and a down region fail
// the call as a reset TCP connection does, a *net.OpError wrapping
// ECONNRESET, whatever the URL's host.
func TestTransportResetsAreNetOpErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*Fleet)
	}{
		{"reset fault", func(f *Fleet) { f.SetFaults([]Fault{{Kind: KindReset, Count: 1}}) }},
		{"region down", func(f *Fleet) { f.SetRegionDown("eu-west", true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustNew(t, ZeroLatency())
			tc.setup(f)
			h := harness{f: f, client: &http.Client{Transport: f.Transport()}, root: "http://any-host.example"}
			resp, err := h.post(context.Background(), FormatAnthropic, "eu-west", chatBody(FormatAnthropic, "sim-opus", "hi", false, ""))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("status %d, want a reset connection", resp.StatusCode)
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("error %v (%T), want a *net.OpError wrapping ECONNRESET", err, err)
			}
		})
	}
}

// TestTransportAnyHost: the host of the URL does not matter.
func TestTransportAnyHost(t *testing.T) {
	f := mustNew(t, ZeroLatency())
	for _, root := range []string{"http://" + TransportHost, "https://api.anthropic.com", "http://127.0.0.1:1"} {
		h := harness{f: f, client: &http.Client{Transport: f.Transport()}, root: root}
		resp, err := h.post(context.Background(), FormatOpenAI, "us-east", chatBody(FormatOpenAI, "sim-opus", "hi", false, ""))
		if err != nil {
			t.Fatalf("%s: %v", root, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"chat.completion"`) {
			t.Fatalf("%s: status %d body %s", root, resp.StatusCode, b)
		}
	}
}

// TestTransportEndsHandlers: inside a synctest bubble, a stalled stream
// ends when its body is closed and a hung call when its context is
// cancelled, at the exact virtual time, and the fleet has no call in
// flight once the bubble is idle (synctest.Test also fails on a goroutine
// left behind).
func TestTransportEndsHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, ZeroLatency())
		h := memHarness(f)

		f.SetFaults([]Fault{{Kind: KindStall, AfterTokens: 2, Count: 1}})
		resp, err := h.post(context.Background(), FormatAnthropic, "us-east", chatBody(FormatAnthropic, "sim-opus", "stream me", true, ""))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if _, err := io.ReadAtLeast(resp.Body, buf, 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := f.InFlight(); n != 1 {
			t.Fatalf("in flight while stalled: %d, want 1", n)
		}
		resp.Body.Close()
		synctest.Wait()
		if n := f.InFlight(); n != 0 {
			t.Fatalf("in flight after closing the body: %d, want 0", n)
		}

		f.SetFaults([]Fault{{Kind: KindHang, Count: 1}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = h.post(ctx, FormatAnthropic, "us-east", chatBody(FormatAnthropic, "sim-opus", "hi", false, ""))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("hung call: %v after %v, want the deadline after 5s", err, time.Since(start))
		}
		synctest.Wait()
		if n := f.InFlight(); n != 0 {
			t.Fatalf("in flight after the deadline: %d, want 0", n)
		}
	})
}
