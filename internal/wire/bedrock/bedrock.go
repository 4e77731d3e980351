// Package bedrock reads Amazon Bedrock's envelope of Anthropic's Messages
// API: the binary application/vnd.amazon.eventstream framing of
// InvokeModelWithResponseStream, whose chunk frames each carry one
// Anthropic stream event (base64 in {"bytes": …}) and whose exception
// frames end the stream with an error, and Bedrock's error answers (the
// x-amzn-ErrorType header and a {"message": …} body). The Anthropic body
// itself is the anthropic codec's. The frame format is decoded by the AWS
// SDK for Go v2's eventstream package, never by hand.
//
// Sources: docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html
// (errors and their statuses), API_runtime_ResponseStream.html (the stream's
// chunk and exception members: modelStreamErrorException 424,
// throttlingException 429, serviceUnavailableException 503, …), and the
// official anthropic-sdk-go v2.15.0 bedrock package (PROTOCOLS.md §6.3).
//
// A stream reader is used by one goroutine; the functions are pure.
package bedrock

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
)

// DefaultVersion is the anthropic_version Bedrock documents for the
// Messages API body (docs.aws.amazon.com/bedrock/latest/userguide/
// model-parameters-anthropic-claude-messages.html).
const DefaultVersion = "bedrock-2023-05-31"

// ContentType is the media type of an InvokeModelWithResponseStream answer.
const ContentType = "application/vnd.amazon.eventstream"

// maxFrame bounds one frame's payload: Bedrock's chunks are one event each
// (a few hundred bytes); the eventstream format itself allows 16 MB.
const maxFrame = 1 << 20

// NewStreamReader returns a reader of the Anthropic events an
// InvokeModelWithResponseStream answer carries: the anthropic codec's
// checks and decoding over the eventstream framing. An exception frame
// becomes the wire's error event (see ExceptionEvent); a frame that does
// not decode, a 502 *llm.APIError with MeshCode MESH_UPSTREAM_PROTOCOL.
func NewStreamReader(r io.Reader) *anthropic.StreamReader {
	s := &source{dec: eventstream.NewDecoder()}
	s.body = errReader{r: r, err: &s.readErr}
	s.r = bufio.NewReaderSize(&s.body, 4<<10)
	return anthropic.NewEventReader(s)
}

// errReader remembers the error its reader returned, so that a frame cut
// by the connection is told from a frame that is wrong.
type errReader struct {
	r   io.Reader
	err *error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		*e.err = err
	}
	return n, err
}

// source turns eventstream frames into SSE-shaped events.
type source struct {
	body    errReader
	readErr error // the body's last read error other than io.EOF
	r       *bufio.Reader
	dec     *eventstream.Decoder
	buf     []byte // the frame payload, reused
	data    []byte // the decoded event, reused (the reader copies it)
}

func (s *source) Next() (sse.Event, error) {
	for {
		msg, err := s.dec.Decode(s.r, s.buf[:0])
		switch {
		case err == nil:
		case s.readErr != nil:
			return sse.Event{}, s.readErr
		case err == io.EOF:
			return sse.Event{}, io.EOF
		case errors.Is(err, io.ErrUnexpectedEOF):
			return sse.Event{}, io.ErrUnexpectedEOF
		default:
			return sse.Event{}, protocolError(fmt.Sprintf("eventstream frame: %v", err))
		}
		if cap(msg.Payload) <= maxFrame {
			s.buf = msg.Payload
		}
		ev, ok, err := s.event(msg)
		if err != nil {
			return sse.Event{}, err
		}
		if ok {
			return ev, nil
		}
	}
}

// event maps one frame: a chunk to its Anthropic event, an exception or
// error frame to the wire's error event; other event types are skipped
// (ok false), as the SDKs skip unknown members of the ResponseStream union.
func (s *source) event(msg eventstream.Message) (sse.Event, bool, error) {
	mt := msg.Headers.Get(eventstreamapi.MessageTypeHeader)
	if mt == nil {
		return sse.Event{}, false, protocolError("eventstream frame without :message-type")
	}
	switch mt.String() {
	case eventstreamapi.EventMessageType:
		et := msg.Headers.Get(eventstreamapi.EventTypeHeader)
		if et == nil {
			return sse.Event{}, false, protocolError("eventstream event without :event-type")
		}
		if et.String() != "chunk" {
			return sse.Event{}, false, nil
		}
		data, err := s.chunk(msg.Payload)
		if err != nil {
			return sse.Event{}, false, protocolError(err.Error())
		}
		typ, err := eventType(data)
		if err != nil {
			return sse.Event{}, false, protocolError(err.Error())
		}
		return sse.Event{Event: typ, Data: data}, true, nil
	case eventstreamapi.ExceptionMessageType:
		name := ""
		if h := msg.Headers.Get(eventstreamapi.ExceptionTypeHeader); h != nil {
			name = h.String()
		}
		return sse.Event{Event: "error", Data: ExceptionEvent(name, msg.Payload)}, true, nil
	case eventstreamapi.ErrorMessageType:
		code, text := "UnknownError", ""
		if h := msg.Headers.Get(eventstreamapi.ErrorCodeHeader); h != nil {
			code = h.String()
		}
		if h := msg.Headers.Get(eventstreamapi.ErrorMessageHeader); h != nil {
			text = h.String()
		}
		return sse.Event{Event: "error", Data: errorEvent(code, text)}, true, nil
	}
	return sse.Event{}, false, protocolError(fmt.Sprintf("eventstream frame of unknown :message-type %q", mt.String()))
}

// chunk decodes a chunk frame's payload {"bytes": base64} into s.data.
func (s *source) chunk(payload []byte) ([]byte, error) {
	payload = jsonx.TrimSpace(payload)
	if len(payload) == 0 || payload[0] != '{' || !jsonx.Valid(payload) {
		return nil, errors.New("chunk payload is not a JSON object")
	}
	var b64 []byte
	found := false
	_ = jsonx.EachMember(payload, func(k, v []byte) error {
		if string(k) == `"bytes"` && len(v) >= 2 && v[0] == '"' {
			b64, found = v[1:len(v)-1], true
		}
		return nil
	})
	if !found {
		return nil, errors.New(`chunk payload without "bytes"`)
	}
	n := base64.StdEncoding.DecodedLen(len(b64))
	if cap(s.data) < n {
		s.data = make([]byte, n)
	}
	k, err := base64.StdEncoding.Decode(s.data[:n], b64)
	if err != nil {
		return nil, fmt.Errorf("chunk bytes: %v", err)
	}
	return s.data[:k], nil
}

// eventType reads the "type" member of an Anthropic event: the SSE event
// name Anthropic's API would have sent it under. The anthropic reader
// validates the whole event after.
func eventType(data []byte) (string, error) {
	data = jsonx.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return "", errors.New("chunk bytes are not a JSON object")
	}
	typ := ""
	_ = jsonx.EachMember(data, func(k, v []byte) error {
		if string(k) == `"type"` {
			typ = eventName(v)
		}
		return nil
	})
	if typ == "" {
		return "", errors.New(`chunk event without "type"`)
	}
	return typ, nil
}

// eventNames are the stream's event types, so that naming one does not
// allocate.
var eventNames = []string{"content_block_delta", "content_block_start", "content_block_stop", "message_delta", "message_start", "message_stop", "ping", "error"}

func eventName(v []byte) string {
	if len(v) >= 2 && v[0] == '"' {
		for _, n := range eventNames {
			if string(v[1:len(v)-1]) == n {
				return n
			}
		}
	}
	s, _ := jsonx.Unquote(v)
	return s
}

// exceptionTypes maps a stream exception (its :exception-type, in
// Bedrock's lower-camel spelling, or an error answer's x-amzn-ErrorType)
// to Keel's error type and the HTTP status Bedrock gives it
// (API_runtime_ResponseStream.html, API_runtime_InvokeModel.html).
var exceptionTypes = map[string]struct {
	typ    llm.ErrorType
	status int
}{
	"ThrottlingException":                 {llm.ErrRateLimit, 429},
	"ServiceQuotaExceededException":       {llm.ErrRateLimit, 400},
	"ModelNotReadyException":              {llm.ErrOverloaded, 429},
	"ServiceUnavailableException":         {llm.ErrOverloaded, 503},
	"InternalServerException":             {llm.ErrAPI, 500},
	"ModelStreamErrorException":           {llm.ErrAPI, 424},
	"ModelErrorException":                 {llm.ErrAPI, 424},
	"ModelTimeoutException":               {llm.ErrTimeout, 408},
	"ValidationException":                 {llm.ErrInvalidRequest, 400},
	"ResourceNotFoundException":           {llm.ErrNotFound, 404},
	"AccessDeniedException":               {llm.ErrPermission, 403},
	"UnrecognizedClientException":         {llm.ErrAuthentication, 403},
	"InvalidSignatureException":           {llm.ErrAuthentication, 403},
	"ExpiredTokenException":               {llm.ErrAuthentication, 403},
	"IncompleteSignatureException":        {llm.ErrAuthentication, 403},
	"MissingAuthenticationTokenException": {llm.ErrAuthentication, 403},
}

// exceptionName normalises an exception name: Bedrock's x-amzn-ErrorType
// may carry a ":namespace" suffix, and stream frames spell the name in
// lower camel case (modelStreamErrorException).
func exceptionName(s string) string {
	s, _, _ = strings.Cut(s, ":")
	s = strings.TrimSpace(s)
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// ExceptionEvent is the Anthropic error event an exception frame ends a
// stream with: {"type":"error","error":{"type":…,"message":…}}, the type
// Keel's for the exception (api_error for modelStreamErrorException) and
// the message the exception's name and its payload's message (with the
// model's original status and message when Bedrock gives them).
func ExceptionEvent(name string, payload []byte) []byte {
	var msg, orig string
	var origStatus string
	if p := jsonx.TrimSpace(payload); len(p) > 0 && p[0] == '{' && jsonx.Valid(p) {
		_ = jsonx.EachMember(p, func(k, v []byte) error {
			key, _ := jsonx.Unquote(k)
			switch strings.ToLower(key) {
			case "message":
				msg, _ = jsonx.Unquote(v)
			case "originalmessage":
				orig, _ = jsonx.Unquote(v)
			case "originalstatuscode":
				origStatus = string(v)
			}
			return nil
		})
	}
	if name == "" {
		name = "UnknownError"
	}
	text := exceptionName(name)
	if msg != "" {
		text += ": " + msg
	}
	if orig != "" {
		text += " (model said " + origStatus + ": " + orig + ")"
	}
	return errorEvent(name, text)
}

func errorEvent(name, text string) []byte {
	typ := llm.ErrAPI
	if t, ok := exceptionTypes[exceptionName(name)]; ok {
		typ = t.typ
	}
	b := append([]byte(`{"type":"error","error":{"type":`), jsonx.AppendString(nil, string(typ))...)
	b = append(b, `,"message":`...)
	b = jsonx.AppendString(b, text)
	return append(b, "}}"...)
}

// ParseError reads a Bedrock error answer: its type from the
// x-amzn-ErrorType header (else the body's __type or code), its message
// from the body's message (any case), the request id from
// x-amzn-RequestId. An Anthropic-shaped error body (some Bedrock errors
// relay the model's) is read as the anthropic codec reads it.
func ParseError(status int, h http.Header, body []byte) *llm.APIError {
	name := h.Get("X-Amzn-Errortype")
	var msg, bodyType string
	anthropicShape := false
	if p := jsonx.TrimSpace(body); len(p) > 0 && p[0] == '{' && jsonx.Valid(p) {
		_ = jsonx.EachMember(p, func(k, v []byte) error {
			key, _ := jsonx.Unquote(k)
			switch strings.ToLower(key) {
			case "message":
				msg, _ = jsonx.Unquote(v)
			case "__type", "code":
				bodyType, _ = jsonx.Unquote(v)
			case "error":
				anthropicShape = len(v) > 0 && v[0] == '{'
			}
			return nil
		})
	}
	if name == "" && anthropicShape {
		e := anthropic.ParseError(status, h, body)
		if e.RequestID == "" {
			e.RequestID = h.Get("X-Amzn-Requestid")
		}
		return e
	}
	if name == "" {
		name = bodyType
	}
	e := &llm.APIError{Status: status, RequestID: h.Get("X-Amzn-Requestid"), RetryAfter: llm.ParseRetryAfter(h, time.Now())}
	n := exceptionName(name)
	if t, ok := exceptionTypes[n]; ok {
		e.Type = t.typ
	} else {
		e.Type = llm.StatusErrorType(status)
	}
	if n != "" {
		e.RawType = n
	}
	switch {
	case msg != "" && n != "":
		e.Message = n + ": " + msg
	case msg != "":
		e.Message = msg
	case n != "":
		e.Message = n
	default:
		e.Message = strings.TrimSpace(string(body[:min(len(body), 512)]))
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
	}
	return e
}

func protocolError(msg string) *llm.APIError {
	return &llm.APIError{Status: 502, Type: llm.ErrAPI, MeshCode: llm.MeshUpstreamProtocolFailed, Message: "bedrock upstream: " + msg}
}
