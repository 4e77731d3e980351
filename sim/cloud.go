package sim

import (
	"bytes"
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
)

// Auth is the credentials the fleet's Amazon Bedrock and Google Vertex AI
// fronts accept. Both fronts authenticate every call, as the real ones
// do: with no credentials configured they refuse every call.
type Auth struct {
	// AWS lists the access keys whose SigV4 signatures the Bedrock front
	// accepts.
	AWS []AWSKey `json:"aws,omitempty"`
	// BedrockAPIKeys lists the Bedrock API keys (Authorization: Bearer)
	// the Bedrock front accepts.
	BedrockAPIKeys []string `json:"bedrock_api_keys,omitempty"`
	// Google lists the service accounts whose signed JWTs the token
	// endpoint (POST /token) exchanges for access tokens.
	Google []GoogleAccount `json:"google,omitempty"`
	// GoogleTokenTTL is the lifetime of an access token the token
	// endpoint issues; 0 means Google's 3599 s.
	GoogleTokenTTL Duration `json:"google_token_ttl,omitempty"`
}

// AWSKey is an AWS access key (with its session token when temporary).
type AWSKey struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token,omitempty"`
}

// GoogleAccount is a service account: its email and its public key (PEM).
type GoogleAccount struct {
	ClientEmail  string `json:"client_email"`
	PublicKeyPEM string `json:"public_key_pem"`
}

// NewGoogleServiceAccount makes a service account for the fleet's token
// endpoint at tokenURI (the fleet's URL + "/token"): the GoogleAccount to
// put in Auth.Google, and the service-account key file (JSON) a Google
// client library reads, as the Cloud console gives one.
func NewGoogleServiceAccount(tokenURI, project, email string) (GoogleAccount, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return GoogleAccount{}, nil, err
	}
	return GoogleServiceAccount(key, tokenURI, project, email)
}

// GoogleServiceAccount is NewGoogleServiceAccount with a given key (a
// benchmark's fixed key, whose generation would otherwise be most of its
// setup's cost and vary).
func GoogleServiceAccount(key *rsa.PrivateKey, tokenURI, project, email string) (GoogleAccount, []byte, error) {
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return GoogleAccount{}, nil, err
	}
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return GoogleAccount{}, nil, err
	}
	file, err := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     project,
		"private_key_id": "sim-key-1",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv})),
		"client_email":   email,
		"client_id":      "100000000000000000001",
		"auth_uri":       "https://accounts.google.com/o/oauth2/auth",
		"token_uri":      tokenURI,
	})
	if err != nil {
		return GoogleAccount{}, nil, err
	}
	acct := GoogleAccount{ClientEmail: email, PublicKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))}
	return acct, file, nil
}

// tokens are the access tokens the fleet's token endpoint issued.
type tokens struct {
	refused atomic.Int64 // calls the Bedrock and Vertex fronts refused as unauthenticated

	mu     sync.Mutex // guards following
	issued map[string]time.Time
	seq    int
}

// TokensIssued is the number of Google access tokens the fleet's token
// endpoint has issued.
func (f *Fleet) TokensIssued() int {
	f.tokens.mu.Lock()
	defer f.tokens.mu.Unlock()
	return f.tokens.seq
}

// AuthRefusals is the number of calls the Bedrock and Vertex fronts
// refused for their authentication (a bad signature or key, an unknown or
// expired token).
func (f *Fleet) AuthRefusals() int64 { return f.tokens.refused.Load() }

func (t *tokens) issue(ttl time.Duration) (string, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.issued == nil {
		t.issued = map[string]time.Time{}
	}
	t.seq++
	var b [12]byte
	rand.Read(b[:])
	tok := "ya29.sim-" + strconv.Itoa(t.seq) + "-" + hex.EncodeToString(b[:])
	exp := time.Now().Add(ttl)
	t.issued[tok] = exp
	return tok, exp
}

// valid reports whether tok was issued and has not expired.
func (t *tokens) valid(tok string) (known, live bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.issued[tok]
	return ok, ok && time.Now().Before(exp)
}

// The Bedrock front (Amazon Bedrock Runtime InvokeModel and
// InvokeModelWithResponseStream for Anthropic models;
// docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html,
// docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html).
var bedrockCodec = &codec{
	format:      llm.FormatAnthropic,
	platform:    platformBedrock,
	parse:       anthropic.ParseRequest,
	encode:      anthropic.EncodeResponse,
	encodeError: anthropic.EncodeError,
	rawStream:   newBedrockStream,
	writeError:  writeBedrockError,
	streamType:  "application/vnd.amazon.eventstream",
	requestID:   "X-Amzn-Requestid",
}

// The Vertex front (Vertex AI rawPredict and streamRawPredict of
// publishers/anthropic models; cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude):
// Anthropic's answers and SSE stream as they are; errors of the Google
// front (quota, authentication) in Google's shape.
var vertexCodec = &codec{
	format:      llm.FormatAnthropic,
	platform:    platformVertex,
	parse:       anthropic.ParseRequest,
	encode:      anthropic.EncodeResponse,
	encodeError: anthropic.EncodeError,
	stream:      anthropicCodec.stream,
	writeError:  writeVertexError,
	requestID:   "Request-Id",
}

const (
	platformBedrock = "bedrock"
	platformVertex  = "vertex"
)

// bedrockError answers a Bedrock error: its status, the exception's name
// in x-amzn-ErrorType, {"message": …} (the shape every AWS JSON service
// uses; docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html).
func bedrockError(w http.ResponseWriter, status int, name, msg string) {
	b, _ := json.Marshal(map[string]string{"message": msg})
	h := w.Header()
	h["X-Amzn-Errortype"] = []string{name + ":http://internal.amazon.com/coral/com.amazon.bedrock/"}
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

// writeBedrockError maps an error of the shared call path to Bedrock's
// exception for it (API_runtime_InvokeModel.html, Errors): a 429 is a
// ThrottlingException (or, for the model_not_ready fault, a
// ModelNotReadyException, also 429), Anthropic's 529 overloaded a
// ServiceUnavailableException 503, a 400 a ValidationException, a 404 a
// ResourceNotFoundException, a 5xx an InternalServerException.
func writeBedrockError(w http.ResponseWriter, e *llm.APIError) {
	status, name, msg := e.Status, "InternalServerException", e.Message
	switch {
	case e.RawType == "ModelNotReadyException":
		status, name = http.StatusTooManyRequests, "ModelNotReadyException"
	case e.Status == http.StatusTooManyRequests:
		name, msg = "ThrottlingException", "Too many requests, please wait before trying again."
	case e.Status == 529 || e.Status == http.StatusServiceUnavailable:
		status, name = http.StatusServiceUnavailable, "ServiceUnavailableException"
	case e.Status == http.StatusNotFound:
		name = "ResourceNotFoundException"
	case e.Status == http.StatusRequestEntityTooLarge, e.Status >= 400 && e.Status < 500:
		status, name = http.StatusBadRequest, "ValidationException"
	default:
		status = http.StatusInternalServerError
	}
	bedrockError(w, status, name, msg)
}

// googleError answers in Google's error shape
// (cloud.google.com/apis/design/errors#http_mapping).
func googleError(w http.ResponseWriter, status int, st, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}})
	h := w.Header()
	h["Content-Type"] = []string{"application/json; charset=UTF-8"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

// writeVertexError: a 429 is Vertex's quota error, RESOURCE_EXHAUSTED with
// the pay-as-you-go message (cloud.google.com/vertex-ai/generative-ai/docs/provisioned-throughput/error-code-429);
// a 404 Google's NOT_FOUND; the model's own errors (400, 5xx, 529) are
// relayed in Anthropic's shape.
func writeVertexError(w http.ResponseWriter, e *llm.APIError) {
	switch e.Status {
	case http.StatusTooManyRequests:
		googleError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Resource exhausted, please try again later.")
	case http.StatusNotFound:
		googleError(w, http.StatusNotFound, "NOT_FOUND", e.Message)
	default:
		b := anthropic.EncodeError(e)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
		w.WriteHeader(e.Status)
		w.Write(b)
	}
}

// bedrockRegionPrefix matches a cross-region inference profile's prefix
// (docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html).
var bedrockRegionPrefix = regexp.MustCompile(`^(us|eu|apac|jp|au|ca|us-gov|global)\.`)

// bedrockVersionSuffix matches a Bedrock model id's version (-v1:0).
var bedrockVersionSuffix = regexp.MustCompile(`-v\d+(:\d+)?$`)

// bedrockModel maps a Bedrock model id (anthropic.claude-…-v1:0, a
// us./eu./global. inference profile of it, or the fleet's own name) to
// the fleet model it names.
func (f *Fleet) bedrockModel(id string) *ModelSpec {
	if m := f.models[id]; m != nil {
		return m
	}
	id = bedrockRegionPrefix.ReplaceAllString(id, "")
	id, ok := strings.CutPrefix(id, "anthropic.")
	if !ok {
		return nil
	}
	return f.models[bedrockVersionSuffix.ReplaceAllString(id, "")]
}

// vertexModel maps a Vertex model id (claude-sonnet-4-5@20250929) to the
// fleet model of Anthropic's id for it (claude-sonnet-4-5-20250929), or of
// the name before the @.
func (f *Fleet) vertexModel(id string) *ModelSpec {
	if m := f.models[id]; m != nil {
		return m
	}
	name, date, ok := strings.Cut(id, "@")
	if !ok {
		return nil
	}
	if m := f.models[name+"-"+date]; m != nil {
		return m
	}
	return f.models[name]
}

// serveBedrock serves POST /model/{model}/invoke and
// /invoke-with-response-stream: it authenticates the call (SigV4 or a
// Bedrock API key), checks the Bedrock body (anthropic_version required,
// no model or stream), and serves it as the Messages call it wraps.
func (f *Fleet) serveBedrock(stream bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqID, _ := f.requestID()
		w.Header()["X-Amzn-Requestid"] = []string{reqID}
		body, err := readBody(r, nil)
		if err != nil || len(body) > maxBodyBytes {
			bedrockError(w, http.StatusBadRequest, "ValidationException", "The request body could not be read.")
			return
		}
		if status, name, msg := f.bedrockAuth(r, body); status != 0 {
			f.tokens.refused.Add(1)
			bedrockError(w, status, name, msg)
			return
		}
		id := r.PathValue("model")
		spec := f.bedrockModel(id)
		if spec == nil {
			bedrockError(w, http.StatusBadRequest, "ValidationException", "The provided model identifier is invalid.")
			return
		}
		inner, msg := platformBody(body, spec.Name, stream, "model", "stream")
		if msg != "" {
			bedrockError(w, http.StatusBadRequest, "ValidationException", msg)
			return
		}
		f.servePlatform(w, r, inner, bedrockCodec)
	}
}

// platformBody checks a platform's Messages body and makes it the
// Anthropic request it wraps: anthropic_version required (Bedrock and
// Vertex both refuse a body without it) and removed, anthropic_beta moved
// to the Anthropic-Beta header value, model and stream set. Keys in
// refused are an error, as Bedrock's "extraneous key [stream] is not
// permitted" validation says.
func platformBody(body []byte, model string, stream bool, refused ...string) (*innerCall, string) {
	body = jsonx.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || !jsonx.Valid(body) {
		return nil, "Malformed input request: expected a JSON object, please reformat your input and try again."
	}
	c := &innerCall{}
	out := append(make([]byte, 0, len(body)+len(model)+32), `{"model":`...)
	out = jsonx.AppendString(out, model)
	if stream {
		out = append(out, `,"stream":true`...)
	}
	sawVersion := false
	var bad string
	_ = jsonx.EachMember(body, func(k, v []byte) error {
		key, _ := jsonx.Unquote(k)
		switch {
		case key == "anthropic_version":
			sawVersion = true
			c.version, _ = jsonx.Unquote(v)
			return nil
		case key == "anthropic_beta":
			var betas []string
			if json.Unmarshal(v, &betas) != nil {
				bad = "Malformed input request: #/anthropic_beta: expected type: JSONArray, please reformat your input and try again."
			}
			c.betas = strings.Join(betas, ",")
			return nil
		case key == "stream" || key == "model":
			for _, r := range refused {
				if r == key && bad == "" {
					bad = "Malformed input request: #: extraneous key [" + key + "] is not permitted, please reformat your input and try again."
				}
			}
			return nil
		}
		out = append(out, ',')
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, v...)
		return nil
	})
	if bad != "" {
		return nil, bad
	}
	if !sawVersion || c.version == "" {
		return nil, "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again."
	}
	c.body = append(out, '}')
	return c, ""
}

// innerCall is the Anthropic call a platform call wraps.
type innerCall struct {
	body    []byte
	version string // the body's anthropic_version
	betas   string
}

// servePlatform serves inner through the shared call path in c's shape.
func (f *Fleet) servePlatform(w http.ResponseWriter, r *http.Request, inner *innerCall, c *codec) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(inner.body))
	r2.ContentLength = int64(len(inner.body))
	r2.Header = http.Header{"Content-Type": {"application/json"}}
	if inner.version == anthropicVersionNoSampling {
		// An Anthropic API date in the body carries its rules (the official
		// SDKs send their header's version there).
		r2.Header.Set("Anthropic-Version", inner.version)
	}
	if inner.betas != "" {
		r2.Header.Set("Anthropic-Beta", inner.betas)
	}
	f.serveAPI(w, r2, r.PathValue("region"), c, nil)
}

// sigV4Skew is how far a request's X-Amz-Date may be from the server's
// clock: AWS refuses a signature more than 5 minutes off ("Signature
// expired", docs.aws.amazon.com/IAM/latest/UserGuide/signature-v4-troubleshooting.html).
const sigV4Skew = 5 * time.Minute

var sigV4Auth = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8})/([^/,]+)/([^/,]+)/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$`)

// bedrockAuth checks a call's authentication as Bedrock does: a Bedrock
// API key (docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html)
// or an AWS Signature V4 for service bedrock, verified by signing the
// request again with the AWS SDK for Go's signer (the oracle) over the
// headers it names, the body's SHA-256 and the signature's own time and
// scope. It returns the status and exception of a refusal, or 0.
func (f *Fleet) bedrockAuth(r *http.Request, body []byte) (int, string, string) {
	authz := r.Header.Get("Authorization")
	if tok, ok := strings.CutPrefix(authz, "Bearer "); ok {
		for _, k := range f.cfg.Auth.BedrockAPIKeys {
			if hmac.Equal([]byte(k), []byte(tok)) {
				return 0, "", ""
			}
		}
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if authz == "" {
		return http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	m := sigV4Auth.FindStringSubmatch(authz)
	if m == nil {
		return http.StatusForbidden, "IncompleteSignatureException", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters."
	}
	akid, day, region, service, signed, sig := m[1], m[2], m[3], m[4], m[5], m[6]
	var key *AWSKey
	for i := range f.cfg.Auth.AWS {
		if f.cfg.Auth.AWS[i].AccessKeyID == akid {
			key = &f.cfg.Auth.AWS[i]
		}
	}
	if key == nil {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	if service != "bedrock" {
		return http.StatusForbidden, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'."
	}
	if key.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != key.SessionToken {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != day {
		return http.StatusForbidden, "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
	}
	if d := time.Since(at); d > sigV4Skew || d < -sigV4Skew {
		return http.StatusForbidden, "InvalidSignatureException", fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 5 min.)",
			at.Format("20060102T150405Z"), time.Now().Add(-sigV4Skew).UTC().Format("20060102T150405Z"), time.Now().UTC().Format("20060102T150405Z"))
	}
	// The oracle: the same request, only the signed headers, signed again.
	u := *r.URL
	u.Scheme, u.Host = "https", r.Host
	o := &http.Request{Method: r.Method, URL: &u, Host: r.Host, Header: http.Header{}, ContentLength: int64(len(body))}
	for _, name := range strings.Split(signed, ";") {
		if name == "host" {
			continue
		}
		if vs := r.Header.Values(name); len(vs) > 0 {
			o.Header[http.CanonicalHeaderKey(name)] = vs
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, o, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		return http.StatusForbidden, "InvalidSignatureException", "signing: " + err.Error()
	}
	want := sigV4Auth.FindStringSubmatch(o.Header.Get("Authorization"))
	if want == nil || want[5] != signed || !hmac.Equal([]byte(want[6]), []byte(sig)) {
		return http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	}
	return 0, "", ""
}

// serveVertex serves POST …/publishers/anthropic/models/{model}:rawPredict
// and :streamRawPredict (and count-tokens:rawPredict): it checks the
// OAuth2 access token (issued by the fleet's token endpoint and not
// expired, else 401 UNAUTHENTICATED as Google answers), the body
// (anthropic_version required) and serves the Messages call it wraps.
func (f *Fleet) serveVertex(w http.ResponseWriter, r *http.Request) {
	if !f.googleAuthorized(w, r) {
		return
	}
	id, method, ok := strings.Cut(r.PathValue("call"), ":")
	if !ok || (method != "rawPredict" && method != "streamRawPredict") {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	body, err := readBody(r, nil)
	if err != nil || len(body) > maxBodyBytes {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "The request body could not be read.")
		return
	}
	if id == "count-tokens" && method == "rawPredict" {
		f.serveVertexCount(w, r, body)
		return
	}
	spec := f.vertexModel(id)
	if spec == nil {
		googleError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Publisher Model `projects/%s/locations/%s/publishers/anthropic/models/%s` not found.",
			r.PathValue("project"), r.PathValue("location"), id))
		return
	}
	inner, msg := platformBody(body, spec.Name, method == "streamRawPredict")
	if msg != "" {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg)
		return
	}
	if b := r.Header.Values("Anthropic-Beta"); len(b) > 0 {
		// Vertex takes betas in the anthropic-beta header, as the
		// official SDKs send them.
		inner.betas = strings.Join(b, ",")
	}
	f.servePlatform(w, r, inner, vertexCodec)
}

// googleAuthorized checks a Vertex AI call's OAuth2 access token (issued
// by the fleet's token endpoint and not expired), answering 401
// UNAUTHENTICATED as Google does when it is not.
func (f *Fleet) googleAuthorized(w http.ResponseWriter, r *http.Request) bool {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if known, live := f.tokens.valid(tok); !live {
		f.tokens.refused.Add(1)
		msg := "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
		if known || tok != "" {
			msg = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
		}
		w.Header().Set("Www-Authenticate", `Bearer realm="https://accounts.google.com/"`)
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", msg)
		return false
	}
	return true
}

// serveVertexCount serves count-tokens:rawPredict: the body is the
// Messages count_tokens body (with its model) plus anthropic_version.
func (f *Fleet) serveVertexCount(w http.ResponseWriter, r *http.Request, body []byte) {
	var model string
	var sawVersion bool
	out := append(make([]byte, 0, len(body)), '{')
	_ = jsonx.EachMember(jsonx.TrimSpace(body), func(k, v []byte) error {
		key, _ := jsonx.Unquote(k)
		switch key {
		case "anthropic_version":
			sawVersion = true
			return nil
		case "model":
			model, _ = jsonx.Unquote(v)
			return nil
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, v...)
		return nil
	})
	if !sawVersion {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "anthropic_version: field required")
		return
	}
	spec := f.vertexModel(model)
	if spec == nil {
		googleError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("Publisher Model `%s` not found.", model))
		return
	}
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = append(out, `"model":`...)
	out = jsonx.AppendString(out, spec.Name)
	out = append(out, '}')
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(out))
	r2.ContentLength = int64(len(out))
	r2.Header = http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
	f.serveCountTokens(w, r2)
}

// jwtBearerGrant is the OAuth2 grant a service account's signed JWT is
// exchanged by (RFC 7523; developers.google.com/identity/protocols/oauth2/service-account#httprest).
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// serveToken is Google's OAuth2 token endpoint for service accounts: the
// assertion must be an RS256 JWT signed by a known account's key, whose
// aud is this endpoint's URL (the token_uri it was sent to), not expired,
// lasting at most an hour, asking for a scope. Errors are OAuth2's
// {"error": "invalid_grant", …} with status 400, as Google answers.
func (f *Fleet) serveToken(w http.ResponseWriter, r *http.Request) {
	fail := func(code, desc string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
	}
	if err := r.ParseForm(); err != nil {
		fail("invalid_request", "the body is not a form")
		return
	}
	if r.PostForm.Get("grant_type") != jwtBearerGrant {
		fail("unsupported_grant_type", "Invalid grant_type: "+r.PostForm.Get("grant_type"))
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		fail("invalid_grant", "Invalid JWT: the assertion is not a JWT.")
		return
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Exp   int64  `json:"exp"`
		Iat   int64  `json:"iat"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &hdr) != nil || json.Unmarshal(cb, &claims) != nil {
		fail("invalid_grant", "Invalid JWT: the assertion does not decode.")
		return
	}
	if hdr.Alg != "RS256" {
		fail("invalid_grant", "Invalid JWT Signature.")
		return
	}
	var pub *rsa.PublicKey
	for _, a := range f.cfg.Auth.Google {
		if a.ClientEmail == claims.Iss {
			if blk, _ := pem.Decode([]byte(a.PublicKeyPEM)); blk != nil {
				if k, err := x509.ParsePKIXPublicKey(blk.Bytes); err == nil {
					pub, _ = k.(*rsa.PublicKey)
				}
			}
		}
	}
	if pub == nil {
		fail("invalid_grant", "Invalid grant: account not found")
		return
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) != nil {
		fail("invalid_grant", "Invalid JWT Signature.")
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if self := scheme + "://" + r.Host + r.URL.Path; claims.Aud != self {
		fail("invalid_grant", fmt.Sprintf("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim. (aud %q is not %q)", claims.Aud, self))
		return
	}
	now := time.Now().Unix()
	if claims.Exp <= now || claims.Iat > now+300 || claims.Exp-claims.Iat > 3600 {
		fail("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
		return
	}
	if claims.Scope == "" {
		fail("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
		return
	}
	ttl := f.cfg.Auth.GoogleTokenTTL.D()
	if ttl <= 0 {
		ttl = 3599 * time.Second
	}
	tok, _ := f.tokens.issue(ttl)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "expires_in": int(ttl / time.Second), "token_type": "Bearer"})
}

// BedrockBaseURL is the base URL of the fleet's Bedrock front for region
// under root (the fleet's URL, or any host over Transport), for
// provider.BedrockConfig.BaseURL.
func BedrockBaseURL(root, region string) string { return root + "/r/" + url.PathEscape(region) }

// VertexBaseURL is the host of the fleet's Vertex front for region, for
// provider.VertexConfig.BaseURL.
func VertexBaseURL(root, region string) string { return root + "/r/" + url.PathEscape(region) }

// bedrockStream writes a stream as Bedrock frames it
// (API_runtime_InvokeModelWithResponseStream.html, API_runtime_ResponseStream.html):
// each Anthropic event a chunk frame (:event-type chunk, :message-type
// event) whose payload is {"bytes": base64 of the event's JSON, "p": …}
// (the padding Bedrock adds), message_stop carrying
// amazon-bedrock-invocationMetrics, and an error event an exception frame
// (:message-type exception, :exception-type modelStreamErrorException,
// the model's original status and message in the payload), after which
// the stream ends.
type bedrockStream struct {
	w     io.Writer
	buf   bytes.Buffer // one event's SSE text
	sw    *anthropic.StreamWriter
	enc   *eventstream.Encoder
	start time.Time
	in    int
	out   int
}

func newBedrockStream(w io.Writer, _ *llm.Request) eventWriter {
	s := &bedrockStream{w: w, enc: eventstream.NewEncoder(), start: time.Now()}
	s.sw = anthropic.NewStreamWriter(sse.NewWriter(&s.buf, nil), anthropic.StreamOptions{})
	return s
}

func (s *bedrockStream) Write(ev *llm.Event) error {
	if ev.Type == llm.EventError {
		msg, _ := json.Marshal(map[string]any{
			"message":            "The model's stream ended with an error: " + ev.Err.Message,
			"originalStatusCode": 529,
			"originalMessage":    ev.Err.Message,
		})
		return s.enc.Encode(s.w, eventstream.Message{Headers: eventstream.Headers{
			{Name: ":exception-type", Value: eventstream.StringValue("modelStreamErrorException")},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("exception")},
		}, Payload: msg})
	}
	switch ev.Type {
	case llm.EventMessageStart:
		if ev.Message != nil {
			s.in = ev.Message.Usage.InputTokens
		}
	case llm.EventMessageDelta:
		if ev.Usage != nil {
			s.out = ev.Usage.OutputTokens
		}
	}
	s.buf.Reset()
	if err := s.sw.Write(ev); err != nil {
		return err
	}
	data := sseData(s.buf.Bytes())
	if ev.Type == llm.EventMessageStop {
		lat := time.Since(s.start).Milliseconds()
		data = fmt.Appendf(nil, `{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":%d,"outputTokenCount":%d,"invocationLatency":%d,"firstByteLatency":%d}}`,
			s.in, s.out, lat, lat)
	}
	payload := append([]byte(`{"bytes":"`), base64.StdEncoding.AppendEncode(nil, data)...)
	payload = append(payload, `","p":"abcdefghijklmnopqrstuvwxyzABCDEFGH"}`...)
	return s.enc.Encode(s.w, eventstream.Message{Headers: eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue("chunk")},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, Payload: payload})
}

// sseData is the data of one SSE event as the anthropic writer writes it
// ("event: x\ndata: {…}\n\n", the JSON on one line).
func sseData(b []byte) []byte {
	_, rest, ok := bytes.Cut(b, []byte("\ndata: "))
	if !ok {
		rest, _ = bytes.CutPrefix(b, []byte("data: "))
	}
	d, _, _ := bytes.Cut(rest, []byte("\n"))
	return bytes.Clone(d)
}
