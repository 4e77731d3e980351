package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// firstBodyChunk is the buffer a request body starts with (or its declared
// length when smaller). The buffer doubles as bytes arrive, up to the
// declared length or the limit: what a request holds follows what it sent,
// not what its Content-Length claims.
const firstBodyChunk = 32 << 10

// bodyRateGrace is the time a body may take before MinBodyRate applies.
const bodyRateGrace = time.Second

// readBody reads r's body within the limits: at most maxBody bytes, before
// the body read timeout, at the minimum average rate, and within the
// in-flight byte budget. It returns the body and the bytes it holds of the
// budget, which the caller releases once the body is parsed; on failure it
// holds none and returns the error to answer. The connection of a body not
// read to its end is closed after the answer.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int64, *llm.APIError) {
	declared := r.ContentLength
	if declared > s.maxBody {
		w.Header().Set("Connection", "close")
		return nil, 0, s.tooLarge()
	}
	want := declared // the buffer never grows beyond it (and one byte)
	if want < 0 {
		want = s.maxBody
	}
	rc := http.NewResponseController(w)
	start := time.Now()
	hard := start.Add(s.bodyTimeout)
	// The embedded transport's writer has no deadlines; its bodies are in
	// memory already.
	deadlines := rc.SetReadDeadline(s.bodyDeadline(start, hard, 0)) == nil
	var held int64
	fail := func(ae *llm.APIError) ([]byte, int64, *llm.APIError) {
		s.release(held)
		h := w.Header()
		h.Set("Connection", "close")
		if ae.RetryAfter > 0 {
			h.Set("Retry-After", strconv.Itoa(int(ae.RetryAfter/time.Second)))
			h.Set("X-Should-Retry", "true")
		}
		return nil, 0, ae
	}
	// One byte beyond want makes room to see the end (or an excess)
	// without another buffer.
	size := int64(firstBodyChunk)
	if want <= size {
		size = want + 1
	}
	if !s.acquire(size) {
		return fail(s.busy())
	}
	held = size
	buf := make([]byte, 0, size)
	body := http.MaxBytesReader(w, r.Body, s.maxBody)
	for {
		if len(buf) == cap(buf) {
			next := 2 * int64(cap(buf))
			if next >= want {
				next = want + 1
			}
			grow := next - int64(cap(buf))
			if !s.acquire(grow) {
				return fail(s.busy())
			}
			held += grow
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > want {
			return fail(s.tooLarge())
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				return fail(s.tooLarge())
			case errors.Is(err, os.ErrDeadlineExceeded):
				return fail(&llm.APIError{Status: http.StatusRequestTimeout, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
					Message: fmt.Sprintf("request body too slow: %d bytes in %s (server.body_read_timeout %s, server.min_body_rate_bytes_per_sec %d after the first %s)",
						len(buf), time.Since(start).Round(time.Millisecond), s.bodyTimeout, s.minRate, bodyRateGrace)})
			}
			return fail(&llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "reading request body: " + err.Error()})
		}
		if deadlines && n > 0 {
			rc.SetReadDeadline(s.bodyDeadline(start, hard, int64(len(buf))))
		}
	}
	if deadlines {
		// The body's deadline must not outlive the body: net/http reads on
		// in the background once the body is done and cancels the request
		// when that read fails. (net/http clears the deadline itself when
		// it starts that read, at the body's EOF, which is why no deadline
		// is set after a read that returned EOF.)
		rc.SetReadDeadline(time.Time{})
	}
	return buf, held, nil
}

// bodyDeadline is when a body that has sent n bytes since start must have
// sent more: its average rate after the grace second stays at MinBodyRate,
// and it ends by hard.
func (s *Server) bodyDeadline(start, hard time.Time, n int64) time.Time {
	d := bodyRateGrace + time.Duration(float64(n)/float64(s.minRate)*float64(time.Second))
	if t := start.Add(d); t.Before(hard) {
		return t
	}
	return hard
}

func (s *Server) tooLarge() *llm.APIError {
	return &llm.APIError{Status: http.StatusRequestEntityTooLarge, Type: llm.ErrTooLarge, MeshCode: llm.MeshBadRequest,
		Message: fmt.Sprintf("request body exceeds the limit of %d bytes (server.max_body_bytes)", s.maxBody)}
}

// busy is the answer when the in-flight body bytes are at their bound.
func (s *Server) busy() *llm.APIError {
	return &llm.APIError{Status: http.StatusTooManyRequests, Type: llm.ErrRateLimit, MeshCode: llm.MeshOverloaded, RetryAfter: time.Second,
		Message: fmt.Sprintf("too many request bytes in flight (server.max_inflight_body_bytes %d); retry shortly", s.maxInflight)}
}

// acquire takes n bytes of the in-flight budget, or reports false at once.
func (s *Server) acquire(n int64) bool {
	for {
		cur := s.inflight.Load()
		if cur+n > s.maxInflight {
			return false
		}
		if s.inflight.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (s *Server) release(n int64) {
	if n != 0 {
		s.inflight.Add(-n)
	}
}
