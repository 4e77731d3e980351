package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's profiles at http://addr/debug/pprof/ until stop.
// Profiling is only ever on an address the operator names (loopback,
// typically), never on an API listener.
func servePprof(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ps := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go ps.Serve(ln)
	return func() { ps.Close() }, nil
}
