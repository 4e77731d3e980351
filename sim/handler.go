package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/azure"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// maxBodyBytes bounds a request body: Anthropic's Messages API answers a
// larger one with 413 request_too_large ("Request exceeds the maximum
// allowed number of bytes.", its 32 MB request size limit, enforced before
// the API reads the body: platform.claude.com/docs/en/api/errors). OpenAI documents
// no byte cap for Chat Completions; its endpoints get the same one, which
// is also the fleet's own bound on what one call may make it hold.
const maxBodyBytes = 32 << 20

// tooLargeMessage is Anthropic's 413 message.
const tooLargeMessage = "Request exceeds the maximum allowed number of bytes."

// readChunk bounds the buffer a body read starts with, whatever its
// Content-Length claims: the buffer grows with what arrives.
const readChunk = 64 << 10

// Rate-limit budgets advertised in the rate-limit headers, per endpoint and
// per minute.
const (
	requestsPerMinute = 4000
	tokensPerMinute   = 400_000
)

// codec is one wire format's server side.
type codec struct {
	format      llm.Format
	parse       func([]byte) (*llm.Request, error)
	encode      func(*llm.Response) ([]byte, error)
	encodeError func(*llm.APIError) []byte
	stream      func(*sse.Writer, *llm.Request) eventWriter
	// azure: served on Azure OpenAI's routes (AzureSpec); gemini: the
	// Gemini API's (GeminiSpec).
	azure, gemini bool
	// A cloud platform's front (Amazon Bedrock, Google Vertex AI) over
	// the Anthropic format: its name, and how it differs.
	platform string
	// rawStream, when set, writes the stream in the platform's framing
	// (instead of stream's SSE), under streamType.
	rawStream  func(io.Writer, *llm.Request) eventWriter
	streamType string
	// writeError, when set, writes errors in the platform's shape.
	writeError func(http.ResponseWriter, *llm.APIError)
	// requestID names the request-id header when not the format's.
	requestID string
}

type eventWriter interface{ Write(*llm.Event) error }

var (
	anthropicCodec = &codec{
		format:      llm.FormatAnthropic,
		parse:       anthropic.ParseRequest,
		encode:      anthropic.EncodeResponse,
		encodeError: anthropic.EncodeError,
		stream: func(w *sse.Writer, _ *llm.Request) eventWriter {
			return anthropic.NewStreamWriter(w, anthropic.StreamOptions{})
		},
	}
	openaiCodec = &codec{
		format:      llm.FormatOpenAI,
		parse:       openai.ParseRequest,
		encode:      openai.EncodeResponse,
		encodeError: openai.EncodeError,
		stream: func(w *sse.Writer, r *llm.Request) eventWriter {
			return openai.NewStreamWriter(w, openai.StreamOptions{IncludeUsage: r.IncludeUsage})
		},
	}
)

func (f *Fleet) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(c *codec, prefixed bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			region := ""
			if prefixed {
				region = r.PathValue("region")
			}
			f.serveAPI(w, r, region, c, nil)
		}
	}
	mux.HandleFunc("POST /v1/messages", api(anthropicCodec, false))
	mux.HandleFunc("POST /r/{region}/v1/messages", api(anthropicCodec, true))
	mux.HandleFunc("POST /v1/chat/completions", api(openaiCodec, false))
	mux.HandleFunc("POST /r/{region}/v1/chat/completions", api(openaiCodec, true))
	mux.HandleFunc("POST /v1/responses", api(responsesCodec, false))
	mux.HandleFunc("POST /r/{region}/v1/responses", api(responsesCodec, true))
	for _, pre := range []string{"", "/r/{region}"} {
		prefixed := pre != ""
		mux.HandleFunc("POST "+pre+"/openai/deployments/{deployment}/chat/completions", f.serveAzure(azureChatCodec, false, prefixed))
		mux.HandleFunc("POST "+pre+"/openai/responses", f.serveAzure(azureResponsesCodec, false, prefixed))
		mux.HandleFunc("POST "+pre+"/openai/v1/chat/completions", f.serveAzure(azureChatCodec, true, prefixed))
		mux.HandleFunc("POST "+pre+"/openai/v1/responses", f.serveAzure(azureResponsesCodec, true, prefixed))
	}
	mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/publishers/google/models/{call}", f.serveVertexGemini(false))
	mux.HandleFunc("POST /r/{region}/v1/projects/{project}/locations/{location}/publishers/google/models/{call}", f.serveVertexGemini(true))
	mux.HandleFunc("POST /v1beta/models/{call}", f.serveGemini(false))
	mux.HandleFunc("POST /r/{region}/v1beta/models/{call}", f.serveGemini(true))
	mux.HandleFunc("POST /v1/embeddings", f.serveEmbeddings)
	mux.HandleFunc("POST /r/{region}/v1/embeddings", f.serveEmbeddings)
	mux.HandleFunc("POST /v1/messages/count_tokens", f.serveCountTokens)
	mux.HandleFunc("POST /r/{region}/v1/messages/count_tokens", f.serveCountTokens)
	mux.HandleFunc("POST /model/{model}/invoke", f.serveBedrock(false))
	mux.HandleFunc("POST /model/{model}/invoke-with-response-stream", f.serveBedrock(true))
	mux.HandleFunc("POST /r/{region}/model/{model}/invoke", f.serveBedrock(false))
	mux.HandleFunc("POST /r/{region}/model/{model}/invoke-with-response-stream", f.serveBedrock(true))
	mux.HandleFunc("POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{call}", f.serveVertex)
	mux.HandleFunc("POST /r/{region}/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{call}", f.serveVertex)
	mux.HandleFunc("POST /token", f.serveToken)
	mux.HandleFunc("GET /v1/models", f.serveModels)
	mux.HandleFunc("GET /r/{region}/v1/models", f.serveModels)

	mux.HandleFunc("POST /sim/regions/{name}/down", f.serveRegion(true))
	mux.HandleFunc("POST /sim/regions/{name}/up", f.serveRegion(false))
	mux.HandleFunc("POST /sim/faults", f.servePutFaults)
	mux.HandleFunc("GET /sim/faults", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, f.Faults()) })
	mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, f.Stats()) })
	mux.HandleFunc("POST /sim/reset", func(w http.ResponseWriter, r *http.Request) {
		f.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", f.serveNotFound)
	return mux
}

// callerCodec guesses the wire format of a request outside the API routes.
func callerCodec(r *http.Request) *codec {
	if r.Header.Get("Anthropic-Version") != "" {
		return anthropicCodec
	}
	return openaiCodec
}

func (f *Fleet) serveNotFound(w http.ResponseWriter, r *http.Request) {
	c := callerCodec(r)
	writeAPIError(w, c, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound,
		Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
}

// readBody appends a request body of at most maxBodyBytes+1 bytes to buf.
// The buffer grows with the bytes that arrive (doubling), from at most
// readChunk bytes, and never past the body's Content-Length (+1, to see EOF
// without growing) until more than that has arrived: a client that
// announces 32 MiB and sends ten bytes costs a small buffer.
func readBody(r *http.Request, buf []byte) ([]byte, error) {
	declared := -1 // Content-Length + 1, when known and within the limit
	if cl := r.ContentLength; cl > 0 && cl <= maxBodyBytes {
		declared = int(cl) + 1
	}
	first := 512
	if declared > 0 {
		first = min(declared, readChunk)
	}
	buf = slices.Grow(buf, first)
	for {
		if len(buf) == cap(buf) {
			n := max(cap(buf), 512) // double what has arrived …
			if declared > len(buf) {
				n = min(n, declared-len(buf)) // … but not past the declared length
			}
			buf = slices.Grow(buf, n)
		}
		room := min(cap(buf), maxBodyBytes+1) - len(buf)
		if room <= 0 {
			return buf, nil
		}
		m, err := r.Body.Read(buf[len(buf) : len(buf)+room])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func writeAPIError(w http.ResponseWriter, c *codec, e *llm.APIError) {
	if c.writeError != nil {
		c.writeError(w, e)
		return
	}
	b := c.encodeError(e)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(e.Status)
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func controlError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]map[string]string{"error": {"message": msg}})
}

func (f *Fleet) serveRegion(down bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := f.SetRegionDown(name, down); err != nil {
			controlError(w, http.StatusNotFound, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"region": name, "down": down})
	}
}

func (f *Fleet) servePutFaults(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		controlError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	fs, err := ParseFaults(body)
	if err != nil {
		controlError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.setFaults(fs)
	writeJSON(w, http.StatusOK, f.Faults())
}

// fixedCreated is the creation time the model lists report.
var fixedCreated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (f *Fleet) serveModels(w http.ResponseWriter, r *http.Request) {
	c := callerCodec(r)
	regionName := r.PathValue("region")
	if regionName != "" && f.regions[regionName] == nil {
		writeAPIError(w, c, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound,
			Message: fmt.Sprintf("region %q not found", regionName)})
		return
	}
	if regionName != "" && f.regions[regionName].down.Load() {
		// A dead region answers nothing at all, models list included.
		resetConn(w)
		return
	}
	var ms []*ModelSpec
	for i := range f.cfg.Models {
		m := &f.cfg.Models[i]
		if !m.serves(c.format) {
			continue
		}
		if regionName == "" || f.eps[epKey{m.Name, regionName}] != nil {
			ms = append(ms, m)
		}
	}
	if c.format == llm.FormatAnthropic {
		type model struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		}
		out := struct {
			Data    []model `json:"data"`
			HasMore bool    `json:"has_more"`
			FirstID *string `json:"first_id"`
			LastID  *string `json:"last_id"`
		}{Data: []model{}}
		for _, m := range ms {
			out.Data = append(out.Data, model{"model", m.Name, m.Name, fixedCreated.Format(time.RFC3339)})
		}
		if n := len(out.Data); n > 0 {
			out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range ms {
		out.Data = append(out.Data, model{m.Name, "model", fixedCreated.Unix(), "keel-sim"})
	}
	writeJSON(w, http.StatusOK, out)
}

// requestID numbers an API call: its request id and its sample number (see
// AnswerSample).
func (f *Fleet) requestID() (string, uint64) {
	n := f.reqSeq.Add(1)
	return hexID("req_sim_", hashString(uint64(f.cfg.Seed)^n*0x9e3779b97f4a7c15, "request")), n
}

// respHeader sets a response's header values, all held in one backing
// array: one allocation per response instead of one per header. Each value
// is a slice of capacity 1, so an append elsewhere copies it.
type respHeader struct {
	h    http.Header
	vals []string
}

func (rh *respHeader) set(key, v string) {
	if len(rh.vals) == cap(rh.vals) {
		rh.vals = make([]string, 0, 16)
	}
	rh.vals = append(rh.vals, v)
	n := len(rh.vals)
	rh.h[key] = rh.vals[n-1 : n : n]
}

// apiCall is the state of one API call whose accounting has begun.
type apiCall struct {
	f     *Fleet
	w     http.ResponseWriter
	c     *codec
	ep    *endpoint
	reqID string
	// held is true while the call holds a slot of the endpoint's queue;
	// finished once its in-flight gauges are released.
	held, finished bool
}

// done ends the call's accounting: it runs right before the last bytes are
// written, so a client that has read them sees the call gone from InFlight
// and its slot free.
func (a *apiCall) done() {
	if a.held {
		a.held = false
		a.ep.q.release()
	}
	if !a.finished {
		a.finished = true
		a.ep.inFlight.Add(-1)
		a.f.inFlight.Add(-1)
	}
}

func (a *apiCall) fail(status int, typ llm.ErrorType, msg string) {
	a.done()
	writeAPIError(a.w, a.c, &llm.APIError{Status: status, Type: typ, Message: msg, RequestID: a.reqID})
}

// bodyPool holds request body buffers. The codecs' parsers copy what they
// keep, so a buffer is reused once its call has been served.
var bodyPool sync.Pool // of *[]byte

// maxPooledBody bounds the buffers kept in bodyPool.
const maxPooledBody = 64 << 10

// serveAPI serves one Messages, Chat Completions, Responses or Gemini
// call; route is set for a call on a provider's own route (Azure's, the
// Gemini API's).
func (f *Fleet) serveAPI(w http.ResponseWriter, r *http.Request, regionName string, c *codec, route *routeCall) {
	ctx := r.Context()
	rh := respHeader{h: w.Header()}
	reqID, sample := f.requestID()
	switch {
	case c.requestID != "":
		rh.set(c.requestID, reqID)
	case c.format == llm.FormatAnthropic:
		rh.set("Request-Id", reqID)
	case c.gemini: // the Gemini API sends no request id header
	default:
		rh.set("X-Request-Id", reqID)
	}
	fail := func(status int, typ llm.ErrorType, msg string) {
		writeAPIError(w, c, &llm.APIError{Status: status, Type: typ, Message: msg, RequestID: reqID})
	}

	if r.ContentLength > maxBodyBytes {
		// Refused before reading, as Anthropic's front does.
		fail(http.StatusRequestEntityTooLarge, llm.ErrTooLarge, tooLargeMessage)
		return
	}
	bp, _ := bodyPool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer func() {
		if cap(*bp) <= maxPooledBody {
			bodyPool.Put(bp)
		}
	}()
	body, err := readBody(r, (*bp)[:0])
	*bp = body
	if err != nil {
		fail(http.StatusBadRequest, llm.ErrInvalidRequest, "reading body: "+err.Error())
		return
	}
	if len(body) > maxBodyBytes {
		fail(http.StatusRequestEntityTooLarge, llm.ErrTooLarge, tooLargeMessage)
		return
	}
	if ctx.Err() != nil {
		return // the client left while sending: parse nothing
	}
	req, err := c.parse(body)
	if err != nil {
		var ae *llm.APIError
		if !errors.As(err, &ae) {
			ae = &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Message: err.Error()}
		}
		// The fleet is a provider, not Keel: its errors carry no mesh code.
		e := *ae
		e.MeshCode, e.RequestID = "", reqID
		if e.Status == 0 {
			e.Status = http.StatusBadRequest
		}
		writeAPIError(w, c, &e)
		return
	}
	if c.format == llm.FormatAnthropic && r.Header.Get("Anthropic-Version") == anthropicVersionNoSampling {
		// Anthropic's API under 2026-10-21 refuses any sampling parameter,
		// even at its default value (PROTOCOLS.md §0.1).
		for _, p := range []struct {
			name string
			set  bool
		}{{"temperature", req.Temperature != nil}, {"top_p", req.TopP != nil}, {"top_k", req.TopK != nil}} {
			if p.set {
				fail(http.StatusBadRequest, llm.ErrInvalidRequest, p.name+": Extra inputs are not permitted")
				return
			}
		}
	}
	if route != nil && route.gemini {
		req.Model, req.Stream = route.model, route.stream
	}
	if route != nil && route.azure {
		if ae := f.azureModel(route, req); ae != nil {
			e := *ae
			e.RequestID = reqID
			writeAPIError(w, c, &e)
			return
		}
	}
	spec := f.models[req.Model]
	if spec == nil {
		fail(http.StatusNotFound, llm.ErrNotFound, fmt.Sprintf("model: %s not found", req.Model))
		return
	}
	if regionName == "" {
		regionName = spec.Regions[0]
	} else if f.regions[regionName] == nil {
		fail(http.StatusNotFound, llm.ErrNotFound, fmt.Sprintf("region %q not found", regionName))
		return
	}
	ep := f.eps[epKey{req.Model, regionName}]
	if ep == nil {
		fail(http.StatusNotFound, llm.ErrNotFound, fmt.Sprintf("model: %s is not served in region %s", req.Model, regionName))
		return
	}
	if c.format == llm.FormatResponses {
		if ae := f.stored.expand(req); ae != nil {
			e := *ae
			e.RequestID = reqID
			writeAPIError(w, c, &e)
			return
		}
	}
	if !spec.serves(c.format) {
		fail(http.StatusNotFound, llm.ErrNotFound, fmt.Sprintf("model: %s is not served in the %s format", req.Model, c.format))
		return
	}
	if ae := checkMessageCount(spec, c.format.Family(), len(req.Messages)); ae != nil {
		e := *ae
		e.RequestID = reqID
		writeAPIError(w, c, &e)
		return
	}
	if tc := req.ToolChoice; tc != nil && tc.Type == llm.ToolChoiceTool && !hasTool(req.Tools, tc.Name) {
		fail(http.StatusBadRequest, llm.ErrInvalidRequest, fmt.Sprintf("tool_choice: tool %q is not in tools", tc.Name))
		return
	}
	cont, ae := continues(spec, c.format.Family(), req)
	if ae != nil {
		e := *ae
		e.RequestID = reqID
		writeAPIError(w, c, &e)
		return
	}
	rf, ae := outputFormat(spec, c.format.Family(), req)
	if ae != nil {
		e := *ae
		e.RequestID = reqID
		writeAPIError(w, c, &e)
		return
	}
	var plan *cachePlan
	if spec.PromptCache != nil {
		if plan, ae = planCache(f.cfg.Seed, spec.PromptCache, c.format.Family(), req); ae != nil {
			e := *ae
			e.RequestID = reqID
			writeAPIError(w, c, &e)
			return
		}
	}
	rh.set("X-Sim-Region", regionName)
	rh.set("X-Sim-Endpoint", ep.name)

	ep.requests.Add(1)
	ep.inFlight.Add(1)
	f.inFlight.Add(1)
	call := apiCall{f: f, w: w, c: c, ep: ep, reqID: reqID}
	defer call.done()
	if ep.region.down.Load() {
		ep.recordFault(kindRegionDown)
		resetConn(w)
		return
	}

	if c.format == llm.FormatResponses {
		req = withCustomToolSchemas(req)
	}
	ans, err := generate(ctx, f.cfg.Seed, req, samplingFor(spec, req, sample), cont, rf)
	if err != nil {
		return // the client has gone: nobody reads an answer
	}
	if cont && spec.EchoPrefill {
		ans.echoPrefill(req)
	}
	if c.format == llm.FormatResponses {
		ans.markCustomCalls(req)
	}
	if spec.ContextWindow > 0 && ans.usage.InputTokens > spec.ContextWindow {
		ep.recordStatus(http.StatusBadRequest)
		call.done()
		writeContextError(w, c, spec, ans.usage.InputTokens, reqID)
		return
	}
	var fault *Fault
	if f.nFaults.Load() != 0 {
		fault = f.pickFault(&callInfo{model: req.Model, region: regionName, format: c.format, platform: c.platform, stream: req.Stream, hasJSON: ans.hasJSON(), azure: c.azure || c.gemini})
	}
	if fault != nil {
		ep.recordFault(fault.Kind)
		switch fault.Kind {
		case KindRateLimit:
			ra := fault.RetryAfter.D()
			if ra <= 0 {
				ra = time.Second
			}
			if c.gemini {
				ep.recordStatus(http.StatusTooManyRequests)
				call.done()
				e := geminiRateLimit(ra)
				writeAPIError(w, c, e)
				return
			}
			if c.platform == "" {
				// Bedrock's ThrottlingException and Vertex's
				// RESOURCE_EXHAUSTED come without retry-after.
				setRetryAfter(&rh, ra)
			}
			f.setRateHeaders(&rh, c, ep, 0, ra)
			ep.recordStatus(http.StatusTooManyRequests)
			call.fail(http.StatusTooManyRequests, llm.ErrRateLimit, "Number of requests has exceeded your rate limit (simulated).")
			return
		case KindOverloaded:
			status := 529
			if c.format.Family() == llm.FormatOpenAI || c.gemini {
				// OpenAI's 503; Gemini's 503 UNAVAILABLE "The model is
				// overloaded."
				status = http.StatusServiceUnavailable
			}
			if fault.RetryAfter > 0 && c.platform == "" {
				setRetryAfter(&rh, fault.RetryAfter.D())
			}
			ep.recordStatus(status)
			call.fail(status, llm.ErrOverloaded, "Overloaded (simulated).")
			return
		case KindModelNotReady:
			ep.recordStatus(http.StatusTooManyRequests)
			call.done()
			writeAPIError(w, c, &llm.APIError{Status: http.StatusTooManyRequests, Type: llm.ErrOverloaded, RawType: "ModelNotReadyException", RequestID: reqID,
				Message: "Model is not ready to serve inference requests. The AWS SDK will automatically retry the operation up to 5 times (simulated)."})
			return
		case KindServerError:
			status := fault.Status
			if status == 0 {
				status = http.StatusInternalServerError
			}
			ep.recordStatus(status)
			call.fail(status, llm.StatusErrorType(status), "Internal server error (simulated).")
			return
		case KindContentFilter:
			if c.gemini {
				ep.recordStatus(http.StatusOK)
				call.done()
				geminiBlocked(w, &rh, req.Model, ans.usage.InputTokens, req.Stream)
				return
			}
			ep.recordStatus(http.StatusBadRequest)
			call.done()
			b := azure.EncodeContentFilterError(contentFilterVerdict)
			rh.set("Content-Type", "application/json")
			rh.set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(http.StatusBadRequest)
			w.Write(b)
			return
		case KindReset:
			resetConn(w)
			return
		case KindHang:
			<-ctx.Done()
			return
		case KindMalformedJSON:
			ans.corrupt(c.format == llm.FormatAnthropic && !req.Stream)
		}
	}

	waited, wait, err := ep.q.acquire(ctx)
	if waited {
		ep.recordWait(wait)
	}
	if err != nil {
		return
	}
	call.held = true
	queueMs := "0"
	if waited {
		queueMs = strconv.FormatFloat(float64(wait)/float64(time.Millisecond), 'f', -1, 64)
	}
	rh.set("X-Sim-Queue-Ms", queueMs)

	ttft, factor := ep.draw(f.cfg.Seed, f.cfg.RequestDraws, ans.h)
	uncached := ans.usage.InputTokens
	if plan != nil {
		uncached -= plan.apply(ep.cache, time.Now(), spec.PromptCache.min(), &ans.usage)
	}
	if p := ep.lat.PrefillPerKTok; p > 0 {
		ttft += time.Duration(int64(p) * int64(uncached) / 1000)
	}
	if fault != nil && fault.Kind == KindSlowStart {
		s := fault.Factor
		if s < 1 {
			s = 10
		}
		ttft = time.Duration(float64(ttft) * s)
	}
	if fault != nil && fault.Kind == KindSlow {
		s := fault.Factor
		if s == 0 {
			s = ep.lat.TailFactor
		}
		if s < 1 {
			s = 10
		}
		factor *= s
	}
	n := ans.tokenCount()
	if !c.gemini { // the Gemini API sends no rate-limit headers
		f.setRateHeaders(&rh, c, ep, ans.usage.InputTokens+n, 0)
	}

	if !req.Stream {
		if sleep(ctx, scale(ttft+time.Duration(n)*ep.lat.PerToken.D(), factor)) != nil {
			return
		}
		ep.q.release()
		call.held = false
		resp := ans.response()
		resp.ID = ans.wireID(c.format)
		resp.Created = time.Now().Unix()
		if c.format == llm.FormatResponses {
			f.stored.keep(req, resp.ID, resp)
			resp.Extra = responsesEcho(req)
		}
		b, err := c.encode(resp)
		if err != nil {
			ep.recordStatus(http.StatusInternalServerError)
			call.fail(http.StatusInternalServerError, llm.ErrAPI, "encoding response: "+err.Error())
			return
		}
		rh.set("Content-Type", "application/json")
		rh.set("Content-Length", strconv.Itoa(len(b)))
		ep.recordOK(&ans.usage)
		call.done()
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		return
	}
	if sleep(ctx, scale(ttft, factor)) != nil {
		return
	}
	if c.streamType != "" {
		rh.set("Content-Type", c.streamType)
	} else {
		rh.set("Content-Type", "text/event-stream")
		rh.set("Cache-Control", "no-cache")
	}
	w.WriteHeader(http.StatusOK)
	ep.recordStatus(http.StatusOK)
	rc := http.NewResponseController(w)
	if c.format == llm.FormatResponses {
		f.stored.keep(req, ans.wireID(c.format), ans.response())
	}
	var sw eventWriter
	if c.rawStream != nil {
		sw = c.rawStream(w, req)
	} else {
		sw = c.stream(sse.NewWriter(w, nil), req)
	}
	f.writeStream(ctx, sw, rc.Flush, ans.wireID(c.format), ans, scale(ep.lat.PerToken.D(), factor), fault, &call)
}

// writeStream sends the answer as stream events, one token per delta, and
// ends the call's accounting right before the final event (after recording
// its tokens when the stream ends cleanly with message_stop; not when it
// ends with an error event). A stream fault fires when fault.AfterTokens
// tokens have been sent, or before the final events when the answer is
// shorter.
//
// Events written back to back leave together: flush runs before every wait
// (a token's delay, a stall), before a cut, and right after the first
// token, so that no event leaves later in the simulated timeline than when
// each was flushed on its own, and the time to the first token is unchanged.
// The rest goes when the handler returns. A zero-latency stream is then two
// writes instead of one per event, byte for byte the same stream.
func (f *Fleet) writeStream(ctx context.Context, sw eventWriter, flush func() error, id string, ans *answer, perToken time.Duration, fault *Fault, call *apiCall) {
	faultAt := -1
	if fault != nil && streamOnly(fault.Kind) && fault.Kind != KindSlowStream {
		faultAt = fault.AfterTokens
	}
	// One event value is reused for every event: the writers encode an
	// event before Write returns and keep nothing of it.
	ev := new(llm.Event)
	write := func(e llm.Event) bool {
		*ev = e
		return sw.Write(ev) == nil
	}
	u := ans.usage
	start := &llm.Response{ID: id, Model: ans.model, Created: time.Now().Unix(), Usage: llm.Usage{InputTokens: u.InputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CacheWrite5mTokens: u.CacheWrite5mTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens, Extra: u.Extra}}
	if !write(llm.Event{Type: llm.EventMessageStart, Message: start}) || !write(llm.Event{Type: llm.EventPing}) {
		return
	}
	sent := 0
	for i := range ans.blocks {
		b := &ans.blocks[i]
		blk := &llm.Block{Type: llm.BlockText}
		dt := llm.DeltaText
		if b.tool {
			blk = &llm.Block{Type: llm.BlockToolUse, ID: b.id, Name: b.name, Input: json.RawMessage("{}"), Raw: b.customRaw()}
			dt = llm.DeltaInputJSON
		}
		if !write(llm.Event{Type: llm.EventBlockStart, Index: i, Block: blk}) {
			return
		}
		for _, tok := range b.tokens {
			if sent == faultAt {
				streamFault(ctx, sw, flush, fault, call)
				return
			}
			gap := streamGap(perToken, sent, fault)
			if gap > 0 && flush() != nil {
				return
			}
			if sleep(ctx, gap) != nil || !write(llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: dt, Delta: tok}) {
				return
			}
			if sent == 0 && flush() != nil {
				return
			}
			sent++
		}
		if !write(llm.Event{Type: llm.EventBlockStop, Index: i}) {
			return
		}
	}
	if faultAt >= 0 {
		streamFault(ctx, sw, flush, fault, call)
		return
	}
	usage := ans.usage
	if !write(llm.Event{Type: llm.EventMessageDelta, StopReason: ans.stop, StopSequence: ans.stopSeq, Usage: &usage}) {
		return
	}
	call.ep.recordTokens(&ans.usage)
	call.done()
	write(llm.Event{Type: llm.EventMessageStop})
}

func streamFault(ctx context.Context, sw eventWriter, flush func() error, fault *Fault, call *apiCall) {
	switch fault.Kind {
	case KindStreamCut:
		// Abort the connection: the client sees the body end without the
		// wire's terminator (a chunked body cut short over HTTP), after the
		// events written so far.
		flush()
		panic(http.ErrAbortHandler)
	case KindStreamError:
		call.done()
		sw.Write(&llm.Event{Type: llm.EventError, Err: &llm.APIError{Status: http.StatusOK, Type: llm.ErrOverloaded, Message: "Overloaded (simulated)."}})
	case KindStall:
		flush()
		<-ctx.Done()
	case KindNoTerminator:
		flush() // and return: the body ends cleanly, the terminator never comes
	}
}

// resetConn drops the connection without an answer: over HTTP/1 it
// hijacks the connection and resets it (SO_LINGER 0); elsewhere it aborts
// the handler, which Transport turns into ECONNRESET.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

func setRetryAfter(rh *respHeader, d time.Duration) {
	secs := (d + time.Second - 1) / time.Second
	rh.set("Retry-After", strconv.FormatInt(int64(secs), 10))
	rh.set("Retry-After-Ms", strconv.FormatInt(d.Milliseconds(), 10))
}

// The rate-limit budgets as header values.
var (
	requestsPerMinuteStr = strconv.Itoa(requestsPerMinute)
	tokensPerMinuteStr   = strconv.Itoa(tokensPerMinute)
)

// setRateHeaders writes the wire's rate-limit headers for a call that uses
// tokens; limited (retryAfter > 0) reports an exhausted request budget.
func (f *Fleet) setRateHeaders(rh *respHeader, c *codec, ep *endpoint, tokens int, retryAfter time.Duration) {
	if c.platform != "" {
		return // Bedrock and Vertex send no rate-limit headers
	}
	now := time.Now()
	count, used, reset, resetStr := ep.rateWindow(now, tokens)
	reqLeft := max(requestsPerMinute-count, 0)
	tokLeft := max(tokensPerMinute-used, 0)
	if retryAfter > 0 {
		reqLeft, reset = 0, now.Add(retryAfter)
		resetStr = reset.UTC().Format(time.RFC3339)
	}
	if c.format == llm.FormatAnthropic {
		rh.set("Anthropic-Ratelimit-Requests-Limit", requestsPerMinuteStr)
		rh.set("Anthropic-Ratelimit-Requests-Remaining", strconv.Itoa(reqLeft))
		rh.set("Anthropic-Ratelimit-Requests-Reset", resetStr)
		rh.set("Anthropic-Ratelimit-Tokens-Limit", tokensPerMinuteStr)
		rh.set("Anthropic-Ratelimit-Tokens-Remaining", strconv.Itoa(tokLeft))
		rh.set("Anthropic-Ratelimit-Tokens-Reset", resetStr)
		return
	}
	rs := reset.Sub(now).Round(time.Millisecond).String()
	rh.set("X-Ratelimit-Limit-Requests", requestsPerMinuteStr)
	rh.set("X-Ratelimit-Remaining-Requests", strconv.Itoa(reqLeft))
	rh.set("X-Ratelimit-Reset-Requests", rs)
	rh.set("X-Ratelimit-Limit-Tokens", tokensPerMinuteStr)
	rh.set("X-Ratelimit-Remaining-Tokens", strconv.Itoa(tokLeft))
	rh.set("X-Ratelimit-Reset-Tokens", rs)
}

// wireID gives the answer's id the wire's usual shape: msg_sim_… for
// Anthropic, chatcmpl-sim_… for Chat Completions, resp_sim_… for the
// Responses API.
func (a *answer) wireID(f llm.Format) string {
	switch f {
	case llm.FormatOpenAI:
		return hexID("chatcmpl-sim_", a.h)
	case llm.FormatResponses:
		return hexID("resp_sim_", a.h)
	}
	return a.id
}

func scale(d time.Duration, factor float64) time.Duration {
	if factor == 1 {
		return d
	}
	return time.Duration(float64(d) * factor)
}

func hasTool(ts []llm.Tool, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

// ContextErrorLlamaCpp is ModelSpec.ContextError for llama.cpp's
// llama-server (PROTOCOLS.md §6.2): on both endpoints, streamed or not, a
// plain JSON 400 in the OpenAI error shape with a numeric code,
// {"error":{"code":400,"message":"request (N tokens) exceeds the available
// context size (M tokens), try increasing it","type":
// "exceed_context_size_error","n_prompt_tokens":N,"n_ctx":M}}.
const ContextErrorLlamaCpp = "llamacpp"

// writeContextError answers a prompt of n tokens that exceeds spec's
// context window, in the shape spec.ContextError names.
func writeContextError(w http.ResponseWriter, c *codec, spec *ModelSpec, n int, reqID string) {
	window := spec.ContextWindow
	if spec.ContextError == ContextErrorLlamaCpp {
		b := fmt.Appendf(nil, `{"error":{"code":400,"message":"request (%d tokens) exceeds the available context size (%d tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":%d}}`, n, window, n, window)
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
		w.WriteHeader(http.StatusBadRequest)
		w.Write(b)
		return
	}
	e := &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, RequestID: reqID,
		Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", n, window)}
	if c.gemini {
		// Gemini's words (google-gemini/gemini-cli#4118).
		e.RawType = "INVALID_ARGUMENT"
		e.Message = fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", n, window)
	}
	if c.format == llm.FormatOpenAI {
		// OpenAI's words and code for the same refusal.
		e.Code, e.Param = "context_length_exceeded", "messages"
		e.Message = fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", window, n)
	}
	writeAPIError(w, c, e)
}

// anthropicVersionNoSampling is the Anthropic API version that refuses
// temperature, top_p and top_k (PROTOCOLS.md §0.1).
const anthropicVersionNoSampling = "2026-10-21"
