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

// Further released GenAI attribute keys Keel sets on spans.
const (
	AttrRequestStream            = "gen_ai.request.stream"
	AttrResponseTimeToFirstChunk = "gen_ai.response.time_to_first_chunk" // s
	AttrUsageReasoningOutput     = "gen_ai.usage.reasoning.output_tokens"
	AttrHTTPStatusCode           = "http.response.status_code"
	// ErrorTypeOther is error.type's catch-all value.
	ErrorTypeOther = "_OTHER"
)

// Keel's own span attributes, in the mesh.* namespace.
const (
	AttrMeshRequestID      = "mesh.request_id"
	AttrMeshFormat         = "mesh.format" // the client's wire format: anthropic, openai, responses
	AttrMeshDomain         = "mesh.domain"
	AttrMeshEndpoint       = "mesh.endpoint"
	AttrMeshRegion         = "mesh.region"
	AttrMeshFallback       = "mesh.fallback.reason"
	AttrMeshModelFallback  = "mesh.fallback.model" // bool: another model served
	AttrMeshLegacy         = "mesh.legacy"         // bool: the safety valve's legacy path
	AttrMeshAttempts       = "mesh.attempts"
	AttrMeshRetries        = "mesh.retries"
	AttrMeshHedges         = "mesh.hedges"
	AttrMeshHedgeWon       = "mesh.hedge.won"
	AttrMeshRecovered      = "mesh.recoveries"
	AttrMeshQueueWait      = "mesh.queue_wait" // s
	AttrMeshNormOffset     = "mesh.normalization.offset"
	AttrMeshAttemptKind    = "mesh.attempt.kind" // primary, retry, hedge, fallback, continuation
	AttrMeshAttemptOutcome = "mesh.attempt.outcome"
	AttrMeshAttemptWinner  = "mesh.attempt.winner"
	AttrMeshAttemptWait    = "mesh.attempt.wait" // s
	AttrMeshAttemptBytes   = "mesh.attempt.bytes"
)

// Explicit histogram bucket boundaries the conventions advise.
var (
	// DurationBuckets are for gen_ai.client.operation.duration and the
	// time-to-first-chunk histogram: 0.01 s doubling to 81.92 s.
	DurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// TokenBuckets are for gen_ai.client.token.usage: 1 quadrupling to 67108864.
	TokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// PrometheusName maps an OpenTelemetry metric name and unit to the name
// Prometheus exposes, the way OpenTelemetry's Prometheus exporter does:
// dots become underscores, "s" appends "_seconds", and annotation units
// such as "{token}" add nothing. So gen_ai.client.operation.duration (s) is
// gen_ai_client_operation_duration_seconds and gen_ai.client.token.usage
// ({token}) is gen_ai_client_token_usage.
func PrometheusName(name, unit string) string {
	n := PrometheusLabel(name)
	switch unit {
	case UnitSeconds:
		n += "_seconds"
	case "ms":
		n += "_milliseconds"
	case "By":
		n += "_bytes"
	}
	return n
}

// PrometheusLabel maps an attribute key to a Prometheus label name: every
// character outside [a-zA-Z0-9_] becomes an underscore
// (gen_ai.token.type → gen_ai_token_type).
func PrometheusLabel(key string) string {
	b := []byte(key)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' && i > 0) {
			b[i] = '_'
		}
	}
	return string(b)
}
