package sim

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server is a fleet served over HTTP/1.1 on a real listener. Its methods are
// safe for concurrent use.
type Server struct {
	fleet    *Fleet
	ln       net.Listener
	srv      *http.Server
	url      string
	serveErr chan error
	once     sync.Once

	mu       sync.Mutex // guards following
	closed   bool
	handlers sync.WaitGroup // Add only under mu while !closed
}

// Start serves the fleet on addr ("127.0.0.1:0" picks a free port) until
// Close.
func (f *Fleet) Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sim: listening: %w", err)
	}
	s := &Server{fleet: f, ln: ln, url: "http://" + ln.Addr().String(), serveErr: make(chan error, 1)}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				panic(http.ErrAbortHandler)
			}
			s.handlers.Add(1)
			s.mu.Unlock()
			defer s.handlers.Done()
			f.handler.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { s.serveErr <- s.srv.Serve(ln) }()
	return s, nil
}

// URL returns the server's root URL, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// Fleet returns the fleet the server serves.
func (s *Server) Fleet() *Fleet { return s.fleet }

// BaseURL returns the SDK base URL of region for format: URL()+"/r/REGION"
// for FormatAnthropic, plus "/v1" for FormatOpenAI; an empty region gives
// the unprefixed base.
func (s *Server) BaseURL(region string, format Format) string {
	return baseURL(s.url, region, format)
}

// Close stops the server, closes every connection (ending calls in flight,
// hung and stalled ones included) and waits for the handlers to return.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		err = s.srv.Close()
		if serr := <-s.serveErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		s.handlers.Wait()
	})
	return err
}
