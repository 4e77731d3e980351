package inproc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWholeResponse(t *testing.T) {
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"echo":"`+string(b)+`"}`)
	})}
	req, _ := http.NewRequest("POST", "https://api.example.com/v1/x", strings.NewReader("hi"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if got, want := string(b), `{"echo":"hi"}`; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(b)) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status %d length %d type %q", resp.StatusCode, resp.ContentLength, resp.Header.Get("Content-Type"))
	}
}

func TestStreamsBeforeHandlerEnds(t *testing.T) {
	release := make(chan struct{})
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "first")
		http.NewResponseController(w).Flush()
		<-release
		io.WriteString(w, "second")
	})}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Fatalf("status %d", resp.StatusCode)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("first read %q %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second" {
		t.Fatalf("rest %q", rest)
	}
}

func TestCloseCancelsHandler(t *testing.T) {
	done := make(chan error, 1)
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		done <- context.Cause(r.Context())
	})}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-done; !errors.Is(err, errBodyClosed) {
		t.Fatalf("handler saw cause %v, want %v", err, errBodyClosed)
	}
}

func TestAbortIsUnexpectedEOF(t *testing.T) {
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if string(b) != "partial" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %q, %v; want partial, unexpected EOF", b, err)
	}
}

func TestAbortBeforeHeaderIsError(t *testing.T) {
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	})}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("want an error")
	}
}

func TestContextCancelBeforeHeader(t *testing.T) {
	started := make(chan struct{})
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
	go func() { <-started; cancel() }()
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestDoesNotModifyRequest(t *testing.T) {
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Mutated", "yes")
	})}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.Header.Get("X-Mutated") != "" {
		t.Fatal("the caller's request was modified")
	}
}

func always(*http.Request, []byte) bool { return true }

// TestBufferedRunsOnCallersGoroutine: with Buffered, the handler has
// returned (and its context is cancelled) when RoundTrip returns, and the
// answer is the same as the streamed path's.
func TestBufferedRunsOnCallersGoroutine(t *testing.T) {
	var handlerCtx context.Context
	var seenBody string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerCtx = r.Context()
		b, _ := io.ReadAll(r.Body)
		seenBody = string(b)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Trailer", "X-End")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"a":`)
		w.(http.Flusher).Flush()
		io.WriteString(w, `1}`)
		w.Header().Set("X-End", "yes")
	})
	var asked []string
	tr := &Transport{Handler: h, Buffered: func(r *http.Request, body []byte) bool {
		asked = append(asked, string(body))
		return true
	}}
	req, _ := http.NewRequest("POST", "https://api.example.com/v1/x", strings.NewReader(`{"q":1}`))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if handlerCtx == nil || handlerCtx.Err() == nil {
		t.Fatal("RoundTrip returned before the handler, or its context is still live")
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `{"a":1}` || resp.StatusCode != http.StatusCreated || resp.ContentLength != 7 {
		t.Fatalf("got %d %q length %d", resp.StatusCode, b, resp.ContentLength)
	}
	if resp.Trailer.Get("X-End") != "yes" {
		t.Fatalf("trailer = %v", resp.Trailer)
	}
	if seenBody != `{"q":1}` || len(asked) != 1 || asked[0] != `{"q":1}` {
		t.Fatalf("handler saw %q, Buffered saw %q", seenBody, asked)
	}
}

func TestBufferedFalseStillStreams(t *testing.T) {
	release := make(chan struct{})
	tr := &Transport{Buffered: func(*http.Request, []byte) bool { return false },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusOK)
			w.Write(b)
			w.(http.Flusher).Flush()
			<-release
		})}
	req, _ := http.NewRequest("POST", "https://api.example.com/v1/x", strings.NewReader("body"))
	resp, err := tr.RoundTrip(req) // returns while the handler waits
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "body" {
		t.Fatalf("read %q, %v", buf, err)
	}
	close(release)
	io.ReadAll(resp.Body)
	resp.Body.Close()
}

func TestBufferedPanicsAndAborts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		wantErr bool   // RoundTrip fails
		wantBad bool   // reading the body fails after the bytes written
		body    string // bytes before the failure
	}{
		{"panic before header", func(w http.ResponseWriter, r *http.Request) { panic("boom") }, true, false, ""},
		{"abort before header", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }, true, false, ""},
		{"abort after header", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			io.WriteString(w, "part")
			panic(http.ErrAbortHandler)
		}, false, true, "part"},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{Handler: tc.h, Buffered: always}
			req, _ := http.NewRequest("GET", "https://api.example.com/v1/models", nil)
			resp, err := tr.RoundTrip(req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tc.body || (rerr != nil) != tc.wantBad {
				t.Fatalf("body %q err %v", b, rerr)
			}
			if tc.wantBad && !errors.Is(rerr, io.ErrUnexpectedEOF) {
				t.Fatalf("err = %v, want io.ErrUnexpectedEOF", rerr)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}
