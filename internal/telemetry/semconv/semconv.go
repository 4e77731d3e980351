// Package semconv holds every OpenTelemetry GenAI semantic-convention name
// Keel emits, in one place, because the conventions are still moving
// (PROTOCOLS §4): the released v1.41 names are the default, and the newer
// experimental names are used only when OTEL_SEMCONV_STABILITY_OPT_IN
// contains "gen_ai_latest_experimental".
package semconv

import (
	"os"
	"strings"
)

// Released (semantic-conventions v1.41) metric names and units.
const (
	MetricOperationDuration  = "gen_ai.client.operation.duration"            // histogram, s
	MetricTokenUsage         = "gen_ai.client.token.usage"                   // histogram, {token}
	MetricTimeToFirstChunk   = "gen_ai.client.operation.time_to_first_chunk" // histogram, s
	MetricTimePerOutputChunk = "gen_ai.client.operation.time_per_output_chunk"
	UnitSeconds              = "s"
	UnitTokens               = "{token}"
)

// Experimental (semantic-conventions-genai) names.
const (
	MetricInferenceDuration         = "gen_ai.client.inference.duration"
	MetricInferenceTimeToFirstChunk = "gen_ai.client.inference.time_to_first_chunk"
	MetricInferenceInputTokens      = "gen_ai.client.inference.usage.input_tokens"
	MetricInferenceOutputTokens     = "gen_ai.client.inference.usage.output_tokens"
)

// Attribute keys.
const (
	AttrOperationName       = "gen_ai.operation.name"
	AttrProviderName        = "gen_ai.provider.name" // was gen_ai.system before v1.37
	AttrRequestModel        = "gen_ai.request.model"
	AttrResponseModel       = "gen_ai.response.model"
	AttrTokenType           = "gen_ai.token.type"
	AttrUsageInputTokens    = "gen_ai.usage.input_tokens" // includes cached tokens
	AttrUsageOutputTokens   = "gen_ai.usage.output_tokens"
	AttrUsageCacheRead      = "gen_ai.usage.cache_read.input_tokens"
	AttrUsageCacheCreation  = "gen_ai.usage.cache_creation.input_tokens" // experimental: cache_write
	AttrUsageCacheWrite     = "gen_ai.usage.cache_write.input_tokens"
	AttrResponseFinish      = "gen_ai.response.finish_reasons"
	AttrErrorType           = "error.type"
	AttrServerAddress       = "server.address"
	OperationChat           = "chat"
	ProviderAnthropic       = "anthropic"
	ProviderOpenAI          = "openai"
	TokenTypeInput          = "input"
	TokenTypeOutput         = "output"
	OptInEnv                = "OTEL_SEMCONV_STABILITY_OPT_IN"
	OptInLatestExperimental = "gen_ai_latest_experimental"
)

// Names is the set of names in force.
type Names struct {
	OperationDuration string
	TimeToFirstChunk  string
	CacheWriteAttr    string
}

// Current returns the names selected by OTEL_SEMCONV_STABILITY_OPT_IN.
func Current() Names { return Select(os.Getenv(OptInEnv)) }

// Select returns the names for an OTEL_SEMCONV_STABILITY_OPT_IN value.
func Select(optIn string) Names {
	for _, v := range strings.Split(optIn, ",") {
		if strings.TrimSpace(v) == OptInLatestExperimental {
			return Names{OperationDuration: MetricInferenceDuration, TimeToFirstChunk: MetricInferenceTimeToFirstChunk, CacheWriteAttr: AttrUsageCacheWrite}
		}
	}
	return Names{OperationDuration: MetricOperationDuration, TimeToFirstChunk: MetricTimeToFirstChunk, CacheWriteAttr: AttrUsageCacheCreation}
}
