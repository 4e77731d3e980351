// Package redistest runs a real redis-server (Debian's package) on a free
// loopback port for tests, and kills and restarts it on demand.
//
// Without redis-server on PATH the test is skipped, except under CI=true,
// where it fails: CI installs the package (.ci/run), so a missing binary
// is a broken setup, not a reason to pass. A Server is not safe for
// concurrent use; its test's Cleanup kills it.
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process started by a test.
type Server struct {
	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server on a free loopback port, without persistence,
// and waits until it accepts connections.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server not found under CI=true (.ci/run installs Debian's redis-server): %v", err)
		}
		t.Skipf("redis-server not installed (apt-get install redis-server): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, bin: bin, port: port}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Kill ends the server at once (SIGKILL) and waits for it; a server not
// running is left as it is.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // a paused server must run to die
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pause stops the server without closing its connections (SIGSTOP): a
// Redis that no longer answers. Resume continues it.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatal("redistest: signal to a server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart starts the server again on the same port (after Kill) and waits
// up to 10s for it to accept connections.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("redistest: Restart of a running server")
	}
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning")
	cmd.Dir = s.t.TempDir()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-s.done:
			s.cmd = nil
			s.t.Fatalf("redis-server on port %d exited at start", s.port)
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatal(fmt.Sprintf("redis-server on port %d not accepting connections after 10s: %v", s.port, err))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
