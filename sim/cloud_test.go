package sim

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/oauth2/jws"
)

const (
	cloudModel = "claude-test-4-5-20250929"
	cloudAKID  = "AKIDSIMTEST"
	cloudKey   = "sim-test-secret"
)

// cloudTestFleet serves cloudModel in regions bedrock and vertex, with an
// AWS key, a Bedrock API key and a service account.
func cloudTestFleet(t testing.TB) (*Fleet, []byte) {
	t.Helper()
	cfg := ZeroLatency()
	cfg.Regions = []RegionSpec{{Name: "bedrock"}, {Name: "vertex"}}
	cfg.Models = []ModelSpec{{Name: cloudModel, Capability: 4, ContextWindow: 200_000, Regions: []string{"bedrock", "vertex"}, Formats: []string{"anthropic"}, TemperatureScale: 1}}
	acct, file, err := NewGoogleServiceAccount("http://sim.test/token", "p1", "sa@p1.iam.gserviceaccount.com")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = Auth{AWS: []AWSKey{{AccessKeyID: cloudAKID, SecretAccessKey: cloudKey}}, BedrockAPIKeys: []string{"bedrock-api-key-1"}, Google: []GoogleAccount{acct}}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, file
}

const bedrockBody = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

func bedrockReq(t testing.TB, model, body string, sign func(*http.Request, []byte)) *http.Request {
	t.Helper()
	r := httptest.NewRequest("POST", "http://bedrock-runtime.us-east-1.amazonaws.com/model/"+url.PathEscape(model)+"/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	if sign != nil {
		sign(r, []byte(body))
	}
	return r
}

func sigv4(secret string, at time.Time) func(*http.Request, []byte) {
	return func(r *http.Request, body []byte) {
		sum := sha256.Sum256(body)
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: cloudAKID, SecretAccessKey: secret}, r, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", at)
		if err != nil {
			panic(err)
		}
	}
}

// TestBedrockFront: what Bedrock accepts and refuses, as it does
// (API_runtime_InvokeModel.html; SigV4 troubleshooting for the signature
// errors; the body's required anthropic_version and extraneous keys).
func TestBedrockFront(t *testing.T) {
	f, _ := cloudTestFleet(t)
	now := time.Now()
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		errTyp string
	}{
		{"signed", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, sigv4(cloudKey, now)), 200, ""},
		{"inference profile", bedrockReq(t, "us.anthropic."+cloudModel+"-v1:0", bedrockBody, sigv4(cloudKey, now)), 200, ""},
		{"api key", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, func(r *http.Request, _ []byte) { r.Header.Set("Authorization", "Bearer bedrock-api-key-1") }), 200, ""},
		{"unsigned", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, nil), 403, "MissingAuthenticationTokenException"},
		{"wrong secret", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, sigv4("other", now)), 403, "InvalidSignatureException"},
		{"expired signature", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, sigv4(cloudKey, now.Add(-6*time.Minute))), 403, "InvalidSignatureException"},
		{"body changed after signing", func() *http.Request {
			r := bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, sigv4(cloudKey, now))
			b := strings.Replace(bedrockBody, "hi", "ho", 1)
			r.Body = io.NopCloser(strings.NewReader(b))
			return r
		}(), 403, "InvalidSignatureException"},
		{"wrong api key", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, func(r *http.Request, _ []byte) { r.Header.Set("Authorization", "Bearer nope") }), 403, "UnrecognizedClientException"},
		{"unknown model", bedrockReq(t, "anthropic.claude-nope-v1:0", bedrockBody, sigv4(cloudKey, now)), 400, "ValidationException"},
		{"model in body", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", `{"model":"x",`+bedrockBody[1:], sigv4(cloudKey, now)), 400, "ValidationException"},
		{"stream in body", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", `{"stream":true,`+bedrockBody[1:], sigv4(cloudKey, now)), 400, "ValidationException"},
		{"no anthropic_version", bedrockReq(t, "anthropic."+cloudModel+"-v1:0", `{"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, sigv4(cloudKey, now)), 400, "ValidationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.Handler().ServeHTTP(w, tc.req)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if got := strings.Split(w.Header().Get("X-Amzn-Errortype"), ":")[0]; got != tc.errTyp {
				t.Errorf("x-amzn-ErrorType %q, want %q", got, tc.errTyp)
			}
			if tc.status == 200 && !strings.Contains(w.Body.String(), `"type":"message"`) {
				t.Errorf("body %s: want an Anthropic message", w.Body)
			}
		})
	}
}

// signJWT makes a service account's token request assertion.
func signJWT(t testing.TB, saFile []byte, aud string, iat time.Time, ttl time.Duration) string {
	t.Helper()
	var sa struct {
		PrivateKey  string `json:"private_key"`
		ClientEmail string `json:"client_email"`
	}
	if err := json.Unmarshal(saFile, &sa); err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode([]byte(sa.PrivateKey))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cs := &jws.ClaimSet{Iss: sa.ClientEmail, Scope: "https://www.googleapis.com/auth/cloud-platform", Aud: aud, Iat: iat.Unix(), Exp: iat.Add(ttl).Unix()}
	s, err := jws.Encode(&jws.Header{Algorithm: "RS256", Typ: "JWT"}, cs, k.(*rsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokenReq(assertion string) *http.Request {
	form := url.Values{"grant_type": {jwtBearerGrant}, "assertion": {assertion}}
	r := httptest.NewRequest("POST", "http://sim.test/token", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// TestGoogleTokenEndpoint: the token endpoint issues a token for a
// service account's valid assertion and refuses one for another audience,
// an expired one, one lasting over an hour, or one signed by another key
// (developers.google.com/identity/protocols/oauth2/service-account).
func TestGoogleTokenEndpoint(t *testing.T) {
	f, sa := cloudTestFleet(t)
	_, other, err := NewGoogleServiceAccount("http://sim.test/token", "p1", "sa@p1.iam.gserviceaccount.com")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name      string
		assertion string
		ok        bool
	}{
		{"valid", signJWT(t, sa, "http://sim.test/token", now, time.Hour), true},
		{"wrong audience", signJWT(t, sa, "https://oauth2.googleapis.com/token", now, time.Hour), false},
		{"expired", signJWT(t, sa, "http://sim.test/token", now.Add(-2*time.Hour), time.Hour), false},
		{"too long", signJWT(t, sa, "http://sim.test/token", now, 2*time.Hour), false},
		{"another key", signJWT(t, other, "http://sim.test/token", now, time.Hour), false},
		{"not a jwt", "abc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.Handler().ServeHTTP(w, tokenReq(tc.assertion))
			var ans struct {
				AccessToken string `json:"access_token"`
				Error       string `json:"error"`
			}
			json.Unmarshal(w.Body.Bytes(), &ans)
			if tc.ok != (w.Code == 200 && ans.AccessToken != "") {
				t.Fatalf("status %d %s, want ok=%v", w.Code, w.Body, tc.ok)
			}
			if !tc.ok && (w.Code != 400 || ans.Error == "") {
				t.Errorf("refusal %d %s, want 400 with an OAuth2 error", w.Code, w.Body)
			}
		})
	}
}

// TestVertexFront: a token the fleet issued is accepted until it expires;
// an unknown or expired token gets Google's 401 UNAUTHENTICATED.
func TestVertexFront(t *testing.T) {
	f, sa := cloudTestFleet(t)
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, tokenReq(signJWT(t, sa, "http://sim.test/token", time.Now(), time.Hour)))
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.Unmarshal(w.Body.Bytes(), &tok)
	call := func(token string) *httptest.ResponseRecorder {
		body := `{"anthropic_version":"vertex-2023-10-16","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
		r := httptest.NewRequest("POST", "http://sim.test/r/vertex/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-test-4-5@20250929:rawPredict", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		f.Handler().ServeHTTP(w, r)
		return w
	}
	if w := call(tok.AccessToken); w.Code != 200 {
		t.Fatalf("issued token: %d %s", w.Code, w.Body)
	}
	if w := call("ya29.forged"); w.Code != 401 || !strings.Contains(w.Body.String(), `"status":"UNAUTHENTICATED"`) {
		t.Fatalf("unknown token: %d %s", w.Code, w.Body)
	}
	f.tokens.mu.Lock()
	f.tokens.issued[tok.AccessToken] = time.Now().Add(-time.Second)
	f.tokens.mu.Unlock()
	if w := call(tok.AccessToken); w.Code != 401 {
		t.Fatalf("expired token: %d %s", w.Code, w.Body)
	}
	if n := f.AuthRefusals(); n != 2 {
		t.Errorf("AuthRefusals %d, want 2", n)
	}
}

// TestBedrockStreamFraming: a streamed answer is eventstream frames of
// base64 chunks, the last message_stop with Bedrock's invocation metrics.
func TestBedrockStreamFraming(t *testing.T) {
	f, _ := cloudTestFleet(t)
	r := bedrockReq(t, "anthropic."+cloudModel+"-v1:0", bedrockBody, nil)
	r.URL.Path = strings.Replace(r.URL.Path, "/invoke", "/invoke-with-response-stream", 1)
	sigv4(cloudKey, time.Now())(r, []byte(bedrockBody))
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, r)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/vnd.amazon.eventstream" {
		t.Fatalf("%d %s", w.Code, w.Header())
	}
	dec := eventstream.NewDecoder()
	body := bytes.NewReader(w.Body.Bytes())
	var last string
	n := 0
	for {
		m, err := dec.Decode(body, nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		var p struct {
			Bytes []byte `json:"bytes"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil || m.Headers.Get(":event-type").String() != "chunk" {
			t.Fatalf("frame %d: %v %s", n, err, m.Payload)
		}
		last = string(p.Bytes)
	}
	if n < 5 || !strings.Contains(last, `"type":"message_stop"`) || !strings.Contains(last, `"amazon-bedrock-invocationMetrics"`) {
		t.Fatalf("%d frames, last %s", n, last)
	}
}

func FuzzPlatformBody(f *testing.F) {
	for _, s := range []string{bedrockBody, `{"model":"x"}`, `{"anthropic_version":"v","anthropic_beta":["a","b"],"stream":true}`, `[]`, `{"anthropic_beta":3}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, msg := platformBody(body, "m", true, "model", "stream")
		if (c == nil) == (msg == "") {
			t.Fatalf("platformBody(%q) = %v, %q", body, c, msg)
		}
		if c != nil && !json.Valid(c.body) {
			t.Fatalf("platformBody(%q) made invalid JSON %s", body, c.body)
		}
	})
}

func FuzzBedrockAuth(f *testing.F) {
	fl, _ := cloudTestFleet(f)
	good := bedrockReq(f, "anthropic."+cloudModel+"-v1:0", bedrockBody, sigv4(cloudKey, time.Now()))
	f.Add(good.Header.Get("Authorization"), good.Header.Get("X-Amz-Date"), []byte(bedrockBody))
	f.Add("Bearer x", "", []byte(``))
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDSIMTEST/20000101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00", "20000101T000000Z", []byte(`{}`))
	f.Fuzz(func(t *testing.T, authz, date string, body []byte) {
		r := httptest.NewRequest("POST", "http://b.test/model/m/invoke", bytes.NewReader(body))
		r.Header.Set("Authorization", authz)
		r.Header.Set("X-Amz-Date", date)
		status, name, _ := fl.bedrockAuth(r, body)
		if status != 0 && name == "" {
			t.Fatalf("refusal %d without an exception name", status)
		}
	})
}

func FuzzServeToken(f *testing.F) {
	fl, sa := cloudTestFleet(f)
	f.Add(signJWT(f, sa, "http://sim.test/token", time.Now(), time.Hour))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, assertion string) {
		w := httptest.NewRecorder()
		fl.Handler().ServeHTTP(w, tokenReq(assertion))
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("status %d", w.Code)
		}
	})
}
