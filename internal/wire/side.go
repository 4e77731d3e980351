package wire

import (
	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
)

// The calls beside the model call that Keel routes (engine.Side).
const (
	// CountTokensPath is Anthropic's token count under an Anthropic base
	// URL (docs.anthropic.com/en/api/messages-count-tokens).
	CountTokensPath = "/v1/messages/count_tokens"
	// EmbeddingsPath is OpenAI's Embeddings API under an OpenAI base URL
	// (platform.openai.com/docs/api-reference/embeddings).
	EmbeddingsPath = "/embeddings"
)

// ParseCountTokens reads a token-count request body (anthropic.ParseCountTokens).
func ParseCountTokens(body []byte) (*llm.Request, error) { return anthropic.ParseCountTokens(body) }

// CountsTokens reports whether an endpoint of format f counts tokens:
// Anthropic's API has count_tokens, OpenAI's Chat Completions API none.
func CountsTokens(f llm.Format) bool { return f == llm.FormatAnthropic }

// ServesEmbeddings reports whether an endpoint of format f can serve the
// Embeddings API (OpenAI's; Anthropic has none).
func ServesEmbeddings(f llm.Format) bool { return f.Family() == llm.FormatOpenAI }

// RewriteCountTokens is the token-count body body (as the client sent it)
// with its system and messages written from r, a ParseCountTokens result
// whose texts were changed (personal data redacted); every other member
// stays as sent.
func RewriteCountTokens(body []byte, r *llm.Request) ([]byte, error) {
	enc, err := anthropic.EncodeRequest(r)
	if err != nil {
		return nil, err
	}
	vals := map[string][]byte{}
	jsonx.EachMember(enc, func(k, v []byte) error {
		if key, _ := jsonx.Unquote(k); key == "system" || key == "messages" {
			vals[key] = v
		}
		return nil
	})
	return jsonx.ReplaceMembers(body, vals), nil
}
