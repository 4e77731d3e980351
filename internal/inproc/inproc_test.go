package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// TestContextCancelledBeforeHeaderIsError: a request whose context is done
// before the handler sends its header gets the context's error, whatever
// the handler does next (returns without writing, writes a status,
// aborts), and a header sent before that is the answer; streamed or
// buffered. Streamed, the caller's goroutine sees the cancellation only
// after the handler has finished (lateCtx): RoundTrip's select once took
// the header of a handler that had returned without writing and answered
// an empty 200 (the flake of TestContextCancelBeforeHeader, issue 26).
func TestContextCancelledBeforeHeaderIsError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool // the handler sends 202 before the cancellation
		after  func(w http.ResponseWriter)
		want   int // the status answered, 0 for context.Canceled
	}{
		{name: "returns without writing", after: func(http.ResponseWriter) {}},
		{name: "writes a body", after: func(w http.ResponseWriter) { io.WriteString(w, "late") }},
		{name: "writes a status", after: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "late")
		}},
		{name: "aborts", after: func(http.ResponseWriter) { panic(http.ErrAbortHandler) }},
		{name: "header sent before", before: true, after: func(http.ResponseWriter) {}, want: http.StatusAccepted},
	} {
		for _, buffered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s buffered=%v", tc.name, buffered), func(t *testing.T) {
				ctx := &lateCtx{Context: context.Background(), done: make(chan struct{})}
				handlerCtx := make(chan context.Context, 1)
				tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					handlerCtx <- r.Context()
					if tc.before {
						w.WriteHeader(http.StatusAccepted)
						http.NewResponseController(w).Flush()
					}
					ctx.cancel() // the caller gives up
					tc.after(w)
				})}
				if buffered {
					tr.Buffered = always
				}
				observed := make(chan struct{})
				go func() {
					defer close(observed)
					<-(<-handlerCtx).Done() // the handler has returned, or RoundTrip has
					close(ctx.done)
				}()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				<-observed
				if tc.want == 0 {
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("err %v (status %d), want context.Canceled", err, statusOf(resp))
					}
					return
				}
				if err != nil || resp.StatusCode != tc.want {
					t.Fatalf("err %v status %d, want status %d", err, statusOf(resp), tc.want)
				}
			})
		}
	}
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

// lateCtx is a caller's context whose cancellation its Done channel shows
// only when the test closes done: Err reports it at once. It stands for
// the goroutine that waits on Done being scheduled after the handler's
// (so RoundTrip wakes to the handler's header first), the interleaving a
// real context only gives by chance.
type lateCtx struct {
	context.Context
	mu       sync.Mutex
	canceled bool
	done     chan struct{}
}

func (c *lateCtx) cancel() { c.mu.Lock(); c.canceled = true; c.mu.Unlock() }

func (c *lateCtx) Done() <-chan struct{} { return c.done }

func (c *lateCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.canceled {
		return context.Canceled
	}
	return nil
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

// TestTrailersOfEventlessStream: a streamed answer whose handler flushes
// its header and returns without a body still delivers its trailers, and
// the transport touches the trailer map from one goroutine at a time
// (run with -race). The map was once made by RoundTrip after the header
// arrived while the handler's goroutine filled it on return: a race that
// lost the trailers when the handler won it.
func TestTrailersOfEventlessStream(t *testing.T) {
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Trailer", "X-Mesh-Attempts, X-Mesh-Region")
		w.Header().Set("X-Mesh-Attempts", "1")
		http.NewResponseController(w).Flush()
		w.Header().Set("X-Mesh-Attempts", "2")
		w.Header().Set("X-Mesh-Region", "b")
	})}
	for i := range 50 {
		req, _ := http.NewRequest("POST", "http://x/v1/messages", strings.NewReader(`{"stream":true}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(b) != 0 {
			t.Fatalf("call %d: body %q, %v; want empty", i, b, err)
		}
		if got, want := resp.Header.Get("X-Mesh-Attempts"), "1"; got != want {
			t.Fatalf("call %d: header X-Mesh-Attempts = %q, want %q", i, got, want)
		}
		want := http.Header{"X-Mesh-Attempts": {"2"}, "X-Mesh-Region": {"b"}}
		if !reflect.DeepEqual(resp.Trailer, want) {
			t.Fatalf("call %d: trailer = %v, want %v", i, resp.Trailer, want)
		}
	}
}

// TestTrailersAsNetHTTP: a handler's trailers reach Response.Trailer as
// net/http's client shows them over a socket, including a name set both
// declared and with http.TrailerPrefix (sent twice, as net/http sends it).
func TestTrailersAsNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		declare string
		set     func(h http.Header)
	}{
		{"declared", "X-A, x-b", func(h http.Header) { h.Set("X-A", "1"); h.Set("X-B", "2") }},
		{"declared, one not set", "X-A, X-B", func(h http.Header) { h.Set("X-A", "1") }},
		{"prefix only", "", func(h http.Header) { h.Set(http.TrailerPrefix+"X-P", "p") }},
		{"declared and prefix", "X-A", func(h http.Header) { h.Set("X-A", "old"); h.Set(http.TrailerPrefix+"X-A", "new") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.declare != "" {
					w.Header().Set("Trailer", tc.declare)
				}
				io.WriteString(w, "data: x\n\n")
				http.NewResponseController(w).Flush()
				tc.set(w.Header())
			})
			srv := httptest.NewServer(h)
			defer srv.Close()
			ht := &http.Transport{}
			defer ht.CloseIdleConnections()
			want := trailerOf(t, ht, srv.URL)
			got := trailerOf(t, &Transport{Handler: h}, "http://x/")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("(-got +want)\n-%v\n+%v", got, want)
			}
			// Buffered, the answer is whole when RoundTrip returns, its
			// trailers too; and the header map is handed over without a
			// copy when no trailer is declared, so trailers must leave it.
			req, _ := http.NewRequest("GET", "http://x/", nil)
			resp, err := (&Transport{Handler: h, Buffered: always}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
			for k := range resp.Header {
				if strings.HasPrefix(k, http.TrailerPrefix) {
					t.Errorf("buffered: header %q, a trailer left in the answer's header", k)
				}
			}
			if g, w := [2]any{resp.Header.Values("Trailer"), resp.Trailer}, [2]any{want[1], want[2]}; !reflect.DeepEqual(g, w) {
				t.Errorf("buffered (-got +want)\n-%v\n+%v", g, w)
			}
		})
	}
}

// trailerOf returns the trailer keys as RoundTrip returns, the Trailer
// header, and the trailer after EOF.
func trailerOf(t *testing.T, rt http.RoundTripper, url string) [3]any {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var before []string
	for k, v := range resp.Trailer {
		if v != nil {
			t.Errorf("trailer %s = %q before EOF", k, v)
		}
		before = append(before, k)
	}
	slices.Sort(before)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	return [3]any{before, resp.Header.Values("Trailer"), resp.Trailer}
}

func TestAborts(t *testing.T) {
	errReset := errors.New("reset")
	for _, tc := range []struct {
		name     string
		buffered bool
		reset    bool
		h        http.HandlerFunc
		wantErr  error // of RoundTrip
		wantRead error // of reading the body
	}{
		{name: "before header", h: abortAfter(""), wantErr: io.ErrUnexpectedEOF},
		{name: "before header, reset", reset: true, h: abortAfter(""), wantErr: errReset},
		{name: "before header, reset, buffered", reset: true, buffered: true, h: abortAfter(""), wantErr: errReset},
		{name: "written, not flushed, reset", reset: true, h: abortAfter("part", false), wantErr: errReset},
		{name: "after header, reset", reset: true, h: abortAfter("part", true), wantRead: io.ErrUnexpectedEOF},
		{name: "after header, reset, buffered", reset: true, buffered: true, h: abortAfter("part", true), wantRead: io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Transport{Handler: tc.h}
			if tc.buffered {
				tr.Buffered = always
			}
			if tc.reset {
				tr.ResetError = func() error { return errReset }
			}
			req, _ := http.NewRequest("GET", "http://x/", nil)
			resp, err := tr.RoundTrip(req)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("RoundTrip error %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if string(b) != "part" || !errors.Is(err, tc.wantRead) {
				t.Fatalf("body %q, %v; want %q, %v", b, err, "part", tc.wantRead)
			}
		})
	}
}

// abortAfter writes body (flushed when flush[0]) and aborts.
func abortAfter(body string, flush ...bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if body != "" {
			io.WriteString(w, body)
		}
		if len(flush) > 0 && flush[0] {
			http.NewResponseController(w).Flush()
		}
		panic(http.ErrAbortHandler)
	}
}

func TestPanicErrorNamesValue(t *testing.T) {
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })}
	req, _ := http.NewRequest("GET", "http://x/", nil)
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v, want one naming the panic", err)
	}
}

// TestHandlerDoneEndsContextAndClosesBody: as under net/http, the
// handler's context ends when it returns, and the transport closes the
// request body (the RoundTripper contract) once the handler is done.
func TestHandlerDoneEndsContextAndClosesBody(t *testing.T) {
	ctxc := make(chan context.Context, 1)
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctxc <- r.Context()
		io.Copy(w, r.Body)
	})}
	rb := &closeBody{Reader: strings.NewReader("hello"), closed: make(chan struct{})}
	req, _ := http.NewRequest("POST", "http://x/", rb)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello" {
		t.Fatalf("body %q", b)
	}
	<-rb.closed // the test times out if the body is never closed
	ctx := <-ctxc
	<-ctx.Done()
	if cause := context.Cause(ctx); !errors.Is(cause, errHandlerDone) {
		t.Fatalf("handler context cause %v, want %v", cause, errHandlerDone)
	}
	resp.Body.Close()
	if req.Host != "x" || req.Header.Get("Host") != "" {
		t.Fatalf("request modified: host %q", req.Host)
	}
}

type closeBody struct {
	io.Reader
	once   sync.Once
	closed chan struct{}
}

func (b *closeBody) Close() error { b.once.Do(func() { close(b.closed) }); return nil }

// TestServesHost: a request built without Host reaches the handler with
// the URL's, as a server sees it.
func TestServesHost(t *testing.T) {
	var host string
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { host = r.Host })}
	req := &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "api.example.com", Path: "/"}, Header: http.Header{}}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if host != "api.example.com" {
		t.Fatalf("handler saw host %q", host)
	}
}

// TestInSynctestBubble: a stream with pauses runs on virtual time, and
// closing its body mid-stream ends the handler, leaving no goroutine
// behind (synctest.Test waits for every goroutine of the bubble).
func TestInSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan error, 1)
		tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			for i := 0; ; i++ {
				select {
				case <-r.Context().Done():
					ended <- context.Cause(r.Context())
					return
				case <-time.After(100 * time.Millisecond):
				}
				fmt.Fprintf(w, "data: %d\n\n", i)
				rc.Flush()
			}
		})}
		start := time.Now()
		req, _ := http.NewRequest("GET", "http://x/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len("data: 0\n\n"))
		for range 3 {
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("three events took %v, want 300ms", got)
		}
		resp.Body.Close()
		if err := <-ended; !errors.Is(err, errBodyClosed) {
			t.Errorf("handler ended with %v, want %v", err, errBodyClosed)
		}
	})
}

// TestReadDeadlineNotSupported: a handler asking the in-process writer for
// a read deadline gets http.ErrNotSupported, as from a writer without the
// method, and the same error value each time (no per-call allocation).
func TestReadDeadlineNotSupported(t *testing.T) {
	var errs [2]error
	tr := &Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		errs[0] = rc.SetReadDeadline(time.Now().Add(time.Second))
		errs[1] = rc.SetReadDeadline(time.Time{})
	}), Buffered: func(*http.Request, []byte) bool { return true }}
	req, _ := http.NewRequest(http.MethodPost, "http://x.invalid/", strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for i, err := range errs {
		if !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("SetReadDeadline #%d = %v, want http.ErrNotSupported", i, err)
		}
	}
	if errs[0] != errs[1] {
		t.Errorf("SetReadDeadline made a new error per call: %p, %p", errs[0], errs[1])
	}
}

// TestStatusLine: Response.Status reads as net/http's client writes it.
func TestStatusLine(t *testing.T) {
	for _, code := range []int{200, 201, 404, 429, 529, 599} {
		if got, want := statusLine(code), strconv.Itoa(code)+" "+http.StatusText(code); got != want {
			t.Errorf("statusLine(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestBufferedAnswerKeepsNoRequestBody: a buffered exchange's answer
// shares one allocation with the request body the handler read; once the
// handler is done, that allocation no longer holds the body's bytes (a
// caller may keep the answer long after the call).
func TestBufferedAnswerKeepsNoRequestBody(t *testing.T) {
	var seen string
	tr := &Transport{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			seen = string(b)
			io.WriteString(w, "ok")
		}),
		Buffered: func(*http.Request, []byte) bool { return true },
	}
	prompt := strings.Repeat("a long prompt ", 100)
	req, _ := http.NewRequest(http.MethodPost, "http://keel.invalid/v1/messages", strings.NewReader(prompt))
	x, err := tr.exchangeBuffered(req, []byte(prompt), true)
	if err != nil {
		t.Fatal(err)
	}
	if seen != prompt {
		t.Fatalf("the handler read %d bytes, want the %d sent", len(seen), len(prompt))
	}
	if n := x.reqBody.Size(); n != 0 {
		t.Errorf("the answer's allocation still holds %d bytes of the request body", n)
	}
	if b, _ := io.ReadAll(x.resp.Body); string(b) != "ok" {
		t.Errorf("answer %q", b)
	}
}
