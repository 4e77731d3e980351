package semcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultTimeout bounds one embeddings call when ClientConfig.Timeout is 0:
// the call waits for it before going upstream, so it is kept short.
const DefaultTimeout = 500 * time.Millisecond

// maxResponseBytes bounds an embeddings response read: 3072 float64s as
// JSON text are about 70 KB.
const maxResponseBytes = 4 << 20

// ErrEmbed is wrapped by every error Embed returns.
var ErrEmbed = errors.New("embedding failed")

// ClientConfig says where the embeddings come from: an endpoint speaking
// OpenAI's Embeddings API (POST {BaseURL}/embeddings).
type ClientConfig struct {
	// BaseURL is the API base, "https://api.openai.com/v1" or the like;
	// /embeddings is appended. Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when set.
	APIKey string
	// Model is the embedding model; required.
	Model string
	// Dimensions, when > 0, is sent as the dimensions parameter.
	Dimensions int
	// Timeout bounds one call; default DefaultTimeout.
	Timeout time.Duration
}

// Client calls an embeddings endpoint. It is safe for concurrent use.
type Client struct {
	cfg ClientConfig
	url string
	hc  *http.Client
}

// NewClient builds a Client that sends through rt (nil =
// http.DefaultTransport).
func NewClient(cfg ClientConfig, rt http.RoundTripper) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case cfg.BaseURL == "":
		return nil, fmt.Errorf("base_url is required: %w", ErrConfig)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("base_url %q is not an http(s) URL: %w", cfg.BaseURL, ErrConfig)
	case cfg.Model == "":
		return nil, fmt.Errorf("model is required: %w", ErrConfig)
	case cfg.Dimensions < 0 || cfg.Timeout < 0:
		return nil, fmt.Errorf("dimensions and timeout must not be negative: %w", ErrConfig)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &Client{cfg: cfg, url: strings.TrimSuffix(cfg.BaseURL, "/") + "/embeddings", hc: &http.Client{Transport: rt}}, nil
}

// Embed returns the embedding of text. It fails, wrapping ErrEmbed, on a
// transport error, a timeout, a non-2xx status or a response without one
// non-empty vector.
func (c *Client) Embed(ctx context.Context, text string) ([]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	body := struct {
		Model      string `json:"model"`
		Input      string `json:"input"`
		Dimensions int    `json:"dimensions,omitempty"`
	}{c.cfg.Model, text, c.cfg.Dimensions}
	b, err := json.Marshal(&body)
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w: %w", ErrEmbed, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("building request: %w: %w", ErrEmbed, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w: %w", c.url, ErrEmbed, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading response: %w: %w", ErrEmbed, err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(raw, &e)
		return nil, fmt.Errorf("status %d %q: %w", resp.StatusCode, e.Error.Message, ErrEmbed)
	}
	if len(raw) > maxResponseBytes {
		return nil, fmt.Errorf("response over %d bytes: %w", maxResponseBytes, ErrEmbed)
	}
	var out struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decoding response: %w: %w", ErrEmbed, err)
	}
	if len(out.Data) != 1 || len(out.Data[0].Embedding) == 0 {
		return nil, fmt.Errorf("response has %d vectors, want 1: %w", len(out.Data), ErrEmbed)
	}
	return out.Data[0].Embedding, nil
}
