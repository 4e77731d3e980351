// Package convstate keeps the conversations of the OpenAI Responses API that
// Keel served, at the canonical level, so that a follow-up naming one with
// previous_response_id can be served by any endpoint — another provider and
// wire format included — by expanding the stored history in front of its
// input (issue 24, item 4).
//
// For each answer served with store true (OpenAI's default when the request
// has no store member) a Conversation is kept under the response id the
// client got: the history as canonical messages (the earlier turns, the
// turn's input items, and its answer as one assistant message, tool calls
// and their outputs included) and the response object as served, for GET
// /v1/responses/{id}. A Store does the Responses API's part of a call
// (Begin, then the keep function it returns, Get, Delete) over a Backend
// that holds conversations: Memory here (the values as they are), the
// request log's SQLite database (store/sqlite) or Redis (store/redis), both
// of which keep them as Encode writes them. A Backend enforces the Bounds:
// entries past their expiry are never returned, and beyond the entry or
// byte bound (Conversation.Size) the oldest go first.
//
// A Store and the Backends here are safe for concurrent use. Begin, Get,
// Delete and keep block for one round trip to the backend (none for
// Memory); keep runs before the answer's last bytes reach the client, so
// a client that sends its follow-up as soon as it has the answer finds it.
// The package imports only llm and the standard library.
package convstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// Defaults of Config's zero fields.
const (
	// DefaultTTL is OpenAI's: response objects are kept 30 days
	// (developers.openai.com/api/docs/guides/migrate-to-responses, "Stored
	// responses are retained for 30 days").
	DefaultTTL = 30 * 24 * time.Hour
	// DefaultMaxConversations bounds the conversations kept.
	DefaultMaxConversations = 10000
	// DefaultMaxBytes bounds the encoded conversations' total size.
	DefaultMaxBytes = 256 << 20
)

// ErrConfig is wrapped by every error Config.Validate returns.
var ErrConfig = errors.New("invalid responses config")

// ErrNotFound is returned by a Backend for an id it does not hold (never
// stored, deleted, expired or evicted).
var ErrNotFound = errors.New("conversation not found")

// Config tunes a Store and its Backend; the YAML section `responses`
// decodes into it. The zero value is the documented default.
type Config struct {
	// TTL is how long a conversation is kept after the answer that ended
	// it; default 720h (30 days, OpenAI's).
	TTL time.Duration `yaml:"store_ttl"`
	// MaxConversations bounds the conversations kept; default 10000.
	MaxConversations int `yaml:"max_conversations"`
	// MaxBytes bounds the encoded conversations' total size; default 256
	// MiB. A conversation larger than MaxBytes is not kept.
	MaxBytes int64 `yaml:"max_stored_bytes"`
	// Store is where they are kept: "memory", "sqlite" (the request log's
	// database) or "redis" (the redis section's server). Empty: redis when
	// a redis section is configured, else sqlite when the request log is
	// on, else memory. Read by the mesh that builds the Store.
	Store string `yaml:"store"`
}

// Stores (Config.Store).
const (
	StoreMemory = "memory"
	StoreSQLite = "sqlite"
	StoreRedis  = "redis"
)

// WithDefaults returns c with its zero bounds set to the defaults.
func (c Config) WithDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxConversations == 0 {
		c.MaxConversations = DefaultMaxConversations
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	return c
}

// Validate reports a negative bound or an unknown store.
func (c Config) Validate() error {
	switch {
	case c.TTL < 0:
		return fmt.Errorf("store_ttl %v is negative: %w", c.TTL, ErrConfig)
	case c.MaxConversations < 0:
		return fmt.Errorf("max_conversations %d is negative: %w", c.MaxConversations, ErrConfig)
	case c.MaxBytes < 0:
		return fmt.Errorf("max_stored_bytes %d is negative: %w", c.MaxBytes, ErrConfig)
	}
	switch c.Store {
	case "", StoreMemory, StoreSQLite, StoreRedis:
	default:
		return fmt.Errorf("store %q: expected memory, sqlite or redis: %w", c.Store, ErrConfig)
	}
	return nil
}

// Bounds are what a Backend enforces on Put.
type Bounds struct {
	// MaxEntries and MaxBytes bound the entries and their total size
	// (Conversation.Size); the oldest entries are dropped first. 0 means
	// no bound.
	MaxEntries int
	MaxBytes   int64
}

// Bounds returns c's bounds, defaults applied.
func (c Config) Bounds() Bounds {
	c = c.WithDefaults()
	return Bounds{MaxEntries: c.MaxConversations, MaxBytes: c.MaxBytes}
}

// Backend holds conversations by key. A Conversation handed to Put or
// returned by Get is not modified afterwards by anyone: a Backend may keep
// and return the value itself. Implementations must be safe for
// concurrent use.
type Backend interface {
	// Put stores c under key until expires (replacing what key held),
	// then drops the oldest entries while the bounds are exceeded. An
	// entry larger than the byte bound is not stored.
	Put(ctx context.Context, key string, c *Conversation, now, expires time.Time) error
	// Get returns what key holds, or ErrNotFound when it holds nothing or
	// its entry expired before now.
	Get(ctx context.Context, key string, now time.Time) (*Conversation, error)
	// Delete removes key's entry; false when there was none (or it had
	// expired before now).
	Delete(ctx context.Context, key string, now time.Time) (bool, error)
}

// Conversation is what Keel keeps of one answer it served.
type Conversation struct {
	// ID is the response id the client got.
	ID string `json:"id"`
	// Owner is the virtual key the answer was made with ("" without one):
	// another key neither reads it nor continues it.
	Owner string `json:"owner,omitempty"`
	// Messages is the history up to and including the answer: the earlier
	// turns (previous_response_id), the turn's input items and the answer
	// as an assistant message. A turn's instructions are not part of it:
	// OpenAI does not carry them over to a follow-up ("When using along
	// with previous_response_id, the instructions from a previous response
	// will not be carried over", API reference, create a response).
	Messages []llm.Message `json:"messages"`
	// Endpoint is the id of the endpoint that served the answer.
	Endpoint string `json:"endpoint,omitempty"`
	// Created is when the answer was kept.
	Created time.Time `json:"created"`
	// Response is the response object as served (GET /v1/responses/{id}).
	// Last: encode splices it in as it is.
	Response json.RawMessage `json:"response"`
}

// Size is what c counts against Bounds.MaxBytes: its response object and
// the content of its messages (texts, tool inputs, opaque state) in bytes,
// plus 32 per block for the rest. Every backend counts the same.
func (c *Conversation) Size() int64 {
	n := int64(len(c.Response) + len(c.ID) + len(c.Owner) + len(c.Endpoint))
	for i := range c.Messages {
		m := &c.Messages[i]
		n += 32 + int64(len(m.Name)) + extraSize(m.Extra) + blocksSize(m.Content)
	}
	return n
}

func blocksSize(bs []llm.Block) int64 {
	var n int64
	for i := range bs {
		b := &bs[i]
		n += 32 + int64(len(b.Text)+len(b.ID)+len(b.Name)+len(b.Input)+len(b.ToolUseID)+len(b.Thinking)+len(b.Signature)+len(b.Data)+len(b.Raw)) +
			extraSize(b.Extra) + blocksSize(b.Content)
		if im := b.Image; im != nil {
			n += int64(len(im.Data) + len(im.URL) + len(im.MediaType))
		}
	}
	return n
}

func extraSize(x llm.Extra) int64 {
	var n int64
	for k, v := range x {
		n += int64(len(k) + len(v))
	}
	return n
}

// Options configure a Store.
type Options struct {
	Config
	// Now is the clock of expiry (nil: time.Now).
	Now func() time.Time
	// Logger receives the failures to keep a conversation; nil discards.
	Logger *slog.Logger
}

// Store is the Responses API's conversation state over a Backend. Safe for
// concurrent use.
type Store struct {
	b   Backend
	ttl time.Duration
	now func() time.Time
	log *slog.Logger
}

// New returns a Store over b.
func New(b Backend, o Options) *Store {
	c := o.Config.WithDefaults()
	now := o.Now
	if now == nil {
		now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{b: b, ttl: c.TTL, now: now, log: log}
}

// Request members of the Responses API this package reads. A codec keeps
// them in llm.Request.Extra, verbatim.
const (
	memberPrevious = "previous_response_id"
	memberStore    = "store"
)

// Begin prepares a request of the Responses API (the caller asks only for
// the API whose codec is Stateful). When it names a
// previous_response_id that owner may read, the stored history is put in
// front of its messages and the member removed, so that any endpoint can
// serve it; an id Keel does not hold is OpenAI's 404
// (previous_response_not_found). keep is nil when the request says store
// false; otherwise it must be called with the answer before the client
// has all of it: resp is the answer as the client gets it, served the
// response object as served (the encoded answer; for a stream, the answer
// encoded whole) and endpoint the id of the endpoint that served it.
// keep logs its failures: the client has its answer either way.
func (s *Store) Begin(ctx context.Context, req *llm.Request, owner string) (keep func(ctx context.Context, resp *llm.Response, served []byte, endpoint string), ae *llm.APIError) {
	prev, err := stringMember(req.Extra, memberPrevious)
	if err != nil {
		return nil, badMember(memberPrevious, "a string", err)
	}
	store := true
	if raw, ok := req.Extra[memberStore]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &store); err != nil {
			return nil, badMember(memberStore, "a boolean", err)
		}
	}
	if prev != "" {
		c, ae := s.get(ctx, prev, owner, previousNotFound)
		if ae != nil {
			return nil, ae
		}
		req.Messages = append(c.Messages[:len(c.Messages):len(c.Messages)], req.Messages...)
	}
	if _, ok := req.Extra[memberPrevious]; ok {
		req.Extra = without(req.Extra, memberPrevious)
	}
	if !store {
		return nil, nil
	}
	history := req.Messages
	return func(ctx context.Context, resp *llm.Response, served []byte, endpoint string) {
		if err := s.keep(ctx, history, resp, served, endpoint, owner); err != nil {
			s.log.Warn("responses: keeping the conversation failed; a follow-up naming it will get 404", "err", err)
		}
	}, nil
}

// Echo returns the members a response object to req echoes from it, as
// OpenAI's does: store (true when absent) and previous_response_id (null
// when absent). Call it before Begin, which removes previous_response_id.
// A response object Keel encodes itself (an answer translated from another
// format) takes them; one passed through as the upstream wrote it keeps
// its own.
func (s *Store) Echo(req *llm.Request) llm.Extra {
	st, ok := req.Extra[memberStore]
	if !ok || string(st) == "null" {
		st = json.RawMessage("true")
	}
	prev, ok := req.Extra[memberPrevious]
	if !ok {
		prev = json.RawMessage("null")
	}
	return llm.Extra{memberStore: st, memberPrevious: prev}
}

func (s *Store) keep(ctx context.Context, history []llm.Message, resp *llm.Response, served []byte, endpoint, owner string) error {
	id := responseID(served)
	if id == "" {
		return errors.New("the response served has no id")
	}
	now := s.now()
	msgs := make([]llm.Message, len(history), len(history)+1)
	copy(msgs, history)
	if len(resp.Content) > 0 {
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: resp.Content})
	}
	c := &Conversation{ID: id, Owner: owner, Messages: msgs, Response: served, Endpoint: endpoint, Created: now}
	if err := s.b.Put(ctx, storageKey(owner, id), c, now, now.Add(s.ttl)); err != nil {
		return fmt.Errorf("storing conversation %s: %w", id, err)
	}
	return nil
}

// responseID is the top-level id of a response object (valid JSON, as
// served), read without decoding the rest; "" when it has none.
func responseID(obj []byte) string {
	var id string
	jsonx.EachMember(obj, func(k, v []byte) error {
		if string(k) == `"id"` {
			id, _ = jsonx.Unquote(v)
			return errFound
		}
		return nil
	})
	return id
}

var errFound = errors.New("found")

// Encode writes c as a backend that keeps bytes holds it: Conversation's
// JSON, with the response object spliced in as served (it is valid JSON
// already; a json.Marshal of it would scan and compact it again).
// c is only read: a write-behind store encodes it while readers use it.
func Encode(c *Conversation) ([]byte, error) {
	resp := c.Response
	cc := *c // a shallow copy: c is shared with readers (WriteBehind's front)
	cc.Response = nil
	b, err := json.Marshal(&cc)
	if err != nil {
		return nil, err
	}
	// b ends with "response":null}: replace the null.
	const tail = `null}`
	out := make([]byte, 0, len(b)-len(tail)+len(resp)+1)
	out = append(append(append(out, b[:len(b)-len(tail)]...), resp...), '}')
	return out, nil
}

// Decode reads what Encode wrote.
func Decode(b []byte) (*Conversation, error) {
	var c Conversation
	err := jsonx.EachMember(b, func(k, v []byte) error {
		switch string(k) {
		case `"response"`:
			c.Response = v
			return nil
		case `"id"`:
			return json.Unmarshal(v, &c.ID)
		case `"owner"`:
			return json.Unmarshal(v, &c.Owner)
		case `"messages"`:
			return json.Unmarshal(v, &c.Messages)
		case `"endpoint"`:
			return json.Unmarshal(v, &c.Endpoint)
		case `"created"`:
			return json.Unmarshal(v, &c.Created)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c.Response == nil {
		return nil, errors.New("no response object")
	}
	for i := range c.Messages {
		unnull(c.Messages[i].Content)
	}
	return &c, nil
}

// Response returns the response object stored under id, as it was
// served, for owner (GET /v1/responses/{id}).
func (s *Store) Response(ctx context.Context, id, owner string) ([]byte, *llm.APIError) {
	c, ae := s.get(ctx, id, owner, responseNotFound)
	if ae != nil {
		return nil, ae
	}
	return c.Response, nil
}

// Get returns the conversation stored under id, for owner.
func (s *Store) Get(ctx context.Context, id, owner string) (*Conversation, *llm.APIError) {
	return s.get(ctx, id, owner, responseNotFound)
}

// Delete removes the conversation stored under id, for owner.
func (s *Store) Delete(ctx context.Context, id, owner string) *llm.APIError {
	if _, ae := s.get(ctx, id, owner, responseNotFound); ae != nil {
		return ae
	}
	ok, err := s.b.Delete(ctx, storageKey(owner, id), s.now())
	if err != nil {
		return unavailable(err)
	}
	if !ok {
		return responseNotFound(id)
	}
	return nil
}

func (s *Store) get(ctx context.Context, id, owner string, notFound func(string) *llm.APIError) (*Conversation, *llm.APIError) {
	c, err := s.b.Get(ctx, storageKey(owner, id), s.now())
	if errors.Is(err, ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, unavailable(err)
	}
	if c.Owner != owner {
		return nil, notFound(id) // another key's: as if it did not exist
	}
	return c, nil
}

// storageKey is where owner's response id is kept: each virtual key has
// its own space, so the same id served to two keys (an answer the
// response cache shares across keys replays its id) is two entries.
func storageKey(owner, id string) string {
	if owner == "" {
		return id
	}
	return owner + "\n" + id
}

// previousNotFound is OpenAI's answer to an unknown previous_response_id
// (docs/RESPONSES-STATE.md): 404, invalid_request_error,
// code previous_response_not_found, param previous_response_id.
func previousNotFound(id string) *llm.APIError {
	return &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest, Code: "previous_response_not_found", Param: memberPrevious,
		Message: "Previous response with id '" + id + "' not found."}
}

// responseNotFound is OpenAI's answer to GET or DELETE of an unknown
// response (docs/RESPONSES-STATE.md).
func responseNotFound(id string) *llm.APIError {
	return &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest,
		Message: "Response with id '" + id + "' not found."}
}

func unavailable(err error) *llm.APIError {
	return &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, MeshCode: llm.MeshOverloaded,
		Message: "the stored responses cannot be read now: " + err.Error()}
}

func badMember(name, want string, err error) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: name, MeshCode: llm.MeshBadRequest,
		Message: fmt.Sprintf("%s: expected %s (%v)", name, want, err)}
}

func stringMember(x llm.Extra, name string) (string, error) {
	raw, ok := x[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// without returns a copy of x without name: the caller's map may be shared.
func without(x llm.Extra, name string) llm.Extra {
	out := make(llm.Extra, len(x))
	for k, v := range x {
		if k != name {
			out[k] = v
		}
	}
	return out
}

// unnull undoes what a JSON round trip does to a block's absent raw
// members (nil encodes as null, which decodes as the bytes "null").
func unnull(bs []llm.Block) {
	for i := range bs {
		b := &bs[i]
		if string(b.Raw) == "null" {
			b.Raw = nil
		}
		if string(b.Input) == "null" {
			b.Input = nil
		}
		unnull(b.Content)
	}
}
