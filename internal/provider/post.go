package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// maxPostAnswer bounds the answer of a Post: an embeddings answer of 2,048
// vectors of 3,072 floats as JSON text is about 80 MB.
const maxPostAnswer = 128 << 20

// PathURL is the URL of path (which may carry a query) under e's base URL:
// "/v1/messages/count_tokens" under https://api.anthropic.com,
// "/embeddings" under https://api.openai.com/v1.
// On a platform, the platform's URL for the path ("" when it has none).
func (e *Endpoint) PathURL(path string) string {
	if e.Platform != nil {
		return e.Platform.PostURL(path, e.UpstreamModel)
	}
	return strings.TrimRight(e.BaseURL, "/") + path
}

// Post sends body to rawURL (a path of ep's API beside the model call:
// a token count, embeddings) with ep's authentication, API version, the
// client headers its format passes on, and ep's extra headers, within
// ep's response-header and request timeouts. The request is not
// modified. A 200 answer is Result.Body, read whole; any other status is
// an *Error of KindStatus with the error parsed in ep's format, and a
// transport failure an *Error of its kind, as Do reports them.
func (c *Client) Post(ctx context.Context, ep *Endpoint, rawURL string, body []byte, call Call) (*Result, error) {
	if rawURL == "" && ep.Platform != nil {
		return nil, &Error{Kind: KindStatus, Endpoint: ep.ID, BeforeResponse: true, API: &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound,
			Message: fmt.Sprintf("provider %s (%s) does not serve this API", ep.Provider, ep.Platform.Name())}}
	}
	if ep.Platform != nil {
		body = withVersion(body, ep.APIVersion(call.ClientHeader))
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &Error{Kind: KindConnect, Endpoint: ep.ID, Err: fmt.Errorf("endpoint URL %q: want http(s)://host/...", rawURL), BeforeResponse: true}
	}
	if call.Sent != nil {
		call.Sent(body)
	}
	actx, cancel := context.WithCancelCause(ctx)
	a := &attempt{cancel: cancel}
	a.begin(ep.RequestTimeout)
	defer a.release()
	hreq := (&http.Request{
		Method: http.MethodPost, URL: u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        make(http.Header, 6+len(ep.Header)),
		Body:          io.NopCloser(bytes.NewReader(body)),
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
		ContentLength: int64(len(body)),
	}).WithContext(actx)
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	codec := wire.For(ep.Format)
	if ep.Platform != nil {
		if err := ep.Platform.Authorize(actx, hreq, body); err != nil {
			return nil, authError(ep, err)
		}
		if ep.Platform.BetasInBody() {
			addHeaders(h, nil, nil, ep)
		} else {
			addHeaders(h, codec, call.ClientHeader, ep)
		}
	} else {
		if e := authorize(actx, ep, codec, h.Set, ep.APIVersion(call.ClientHeader)); e != nil {
			return nil, e
		}
		addHeaders(h, codec, call.ClientHeader, ep)
	}
	a.awaitHeader(ep.ResponseHeaderTimeout)
	resp, err := c.rt.RoundTrip(hreq)
	a.headed()
	if err != nil {
		e := classifyTransportErr(ep.ID, err, context.Cause(actx), ctx)
		e.BeforeResponse = true
		return nil, e
	}
	defer resp.Body.Close()
	limit := int64(maxPostAnswer)
	if resp.StatusCode != http.StatusOK {
		limit = 1 << 20
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, limit))
	if call.Received != nil {
		call.Received.Add(int64(len(b)))
	}
	if resp.StatusCode != http.StatusOK {
		if rerr != nil && len(b) == 0 {
			return nil, classifyTransportErr(ep.ID, rerr, context.Cause(actx), ctx)
		}
		return nil, statusError(ep, codec, resp, b)
	}
	if rerr != nil {
		return nil, classifyTransportErr(ep.ID, rerr, context.Cause(actx), ctx)
	}
	return &Result{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}
