package provider

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/sim"
)

// BenchmarkPlatformCall measures one call of the same request to the same
// simulated model (zero latency, in-memory transport) through Anthropic's
// API format, Bedrock signed with SigV4, Bedrock with an API key, and
// Vertex with a cached OAuth2 token, streamed and not: the difference
// between the anthropic case and the others is what the platform adds
// (the envelope, signing, token lookup, eventstream decoding, and the
// simulator's own cost of verifying and framing, which a real upstream
// bears instead).
func BenchmarkPlatformCall(b *testing.B) {
	f, sa := benchFleet(b)
	benchPlatforms(b, f, sa, func(*Endpoint, bool) http.RoundTripper { return f.Transport() })
}

// BenchmarkPlatformClient is BenchmarkPlatformCall without the simulator:
// each endpoint's answer is recorded from it once and replayed, so the
// figures are Keel's own cost per call (building, enveloping, signing or
// authorizing, sending, reading and decoding).
func BenchmarkPlatformClient(b *testing.B) {
	f, sa := benchFleet(b)
	benchPlatforms(b, f, sa, func(ep *Endpoint, stream bool) http.RoundTripper {
		rec := &replay{rt: f.Transport()}
		res, err := NewClient(rec).Do(context.Background(), ep, claudeRequest(b, stream), Call{})
		if err != nil {
			b.Fatal(err)
		}
		if res.Stream != nil {
			for {
				if _, err := res.Stream.Next(); err != nil {
					break
				}
			}
			res.Stream.Close()
		}
		rec.rt = nil
		return rec
	})
}

// replay records one answer from rt, then answers every request with it.
type replay struct {
	rt     http.RoundTripper
	status int
	header http.Header
	body   []byte
}

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	if r.rt != nil {
		c := req.Clone(req.Context())
		c.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := r.rt.RoundTrip(c)
		if err != nil {
			return nil, err
		}
		r.status, r.header = resp.StatusCode, resp.Header
		r.body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return &http.Response{StatusCode: r.status, Header: r.header, Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: req}, nil
}

func benchPlatforms(b *testing.B, f *sim.Fleet, sa string, transport func(*Endpoint, bool) http.RoundTripper) {
	bedrockKey := bedrockEndpoint(b, f, testSecret)
	bk, err := NewBedrock(context.Background(), BedrockConfig{Region: "us-east-1", BaseURL: bedrockKey.Platform.(*Bedrock).base, APIKey: "bedrock-api-key"})
	if err != nil {
		b.Fatal(err)
	}
	keyEP := *bedrockKey
	keyEP.Platform = bk
	for _, tc := range []struct {
		name string
		ep   *Endpoint
	}{
		{"anthropic", anthropicEndpoint()},
		{"bedrock-sigv4", bedrockEndpoint(b, f, testSecret)},
		{"bedrock-apikey", &keyEP},
		{"vertex", vertexEndpoint(b, f, sa)},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name + "/json"
			if stream {
				name = tc.name + "/stream"
			}
			b.Run(name, func(b *testing.B) {
				c := NewClient(transport(tc.ep, stream))
				req := claudeRequest(b, stream)
				b.ReportAllocs()
				for b.Loop() {
					res, err := c.Do(context.Background(), tc.ep, req, Call{})
					if err != nil {
						b.Fatal(err)
					}
					if stream {
						for {
							_, err := res.Stream.Next()
							if err == io.EOF {
								break
							}
							if err != nil {
								b.Fatal(err)
							}
						}
						res.Stream.Close()
					} else if len(res.Response.Content) == 0 || res.Response.Content[0].Type != llm.BlockText {
						b.Fatal("no text")
					}
				}
			})
		}
	}
}

// benchFleet is cloudFleet with a Bedrock API key and a fixed service
// account key (testdata/bench-google-key.pem, made for these benchmarks
// and trusted by nothing but the simulator they start), so that setup
// costs the same in every run.
func benchFleet(b *testing.B) (*sim.Fleet, string) {
	b.Helper()
	data, err := os.ReadFile("testdata/bench-google-key.pem")
	if err != nil {
		b.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		b.Fatal("testdata/bench-google-key.pem: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		b.Fatal(err)
	}
	return cloudFleetKey(b, k.(*rsa.PrivateKey), func(c *sim.Config) { c.Auth.BedrockAPIKeys = []string{"bedrock-api-key"} })
}
