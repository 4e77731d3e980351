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
