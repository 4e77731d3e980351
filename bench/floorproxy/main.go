// Command floorproxy is the measuring stick for Keel's overhead figures: a
// reverse proxy that does nothing but copy a request upstream and the
// answer back, with net/http on both sides. What it adds on a machine is
// the floor any net/http-based gateway pays there (BENCHMARKS.md).
//
//	go run ./bench/floorproxy -listen 127.0.0.1:17881 -upstream http://127.0.0.1:17879
package main

import (
	"bytes"
	"flag"
	"io"
	"log"
	"net/http"
	"strings"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:17881", "address to listen on")
	upstream := flag.String("upstream", "http://127.0.0.1:17879", "base URL requests are forwarded to")
	flag.Parse()
	base := strings.TrimRight(*upstream, "/")
	tr := &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			io.Copy(w, resp.Body)
			return
		}
		// A stream is passed on as it arrives (httputil.ReverseProxy does
		// the same for event streams), else its first token waits for 4 KiB.
		rc := http.NewResponseController(w)
		buf := make([]byte, 2048)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				rc.Flush()
			}
			if err != nil {
				return
			}
		}
	})
	log.Fatal(http.ListenAndServe(*listen, h))
}
