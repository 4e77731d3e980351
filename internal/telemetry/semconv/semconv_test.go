package semconv

import "testing"

// PROTOCOLS §0.10: the GenAI names live here, released names by default,
// the experimental ones only on opt-in.
func TestSelect(t *testing.T) {
	cases := []struct {
		name, optIn string
		want        Names
	}{
		{"default", "", Names{"gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk", "gen_ai.usage.cache_creation.input_tokens"}},
		{"other opt-in", "http", Names{"gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk", "gen_ai.usage.cache_creation.input_tokens"}},
		{"experimental", "http, gen_ai_latest_experimental", Names{"gen_ai.client.inference.duration", "gen_ai.client.inference.time_to_first_chunk", "gen_ai.usage.cache_write.input_tokens"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Select(c.optIn); got != c.want {
				t.Errorf("Select(%q) = %+v, want %+v", c.optIn, got, c.want)
			}
		})
	}
	if AttrProviderName != "gen_ai.provider.name" {
		t.Errorf("provider attribute %q: gen_ai.system was renamed in v1.37", AttrProviderName)
	}
}

func TestPrometheusName(t *testing.T) {
	cases := []struct {
		name, metric, unit, want string
	}{
		{"seconds", MetricOperationDuration, UnitSeconds, "gen_ai_client_operation_duration_seconds"},
		{"annotation unit", MetricTokenUsage, UnitTokens, "gen_ai_client_token_usage"},
		{"ttfc", MetricTimeToFirstChunk, UnitSeconds, "gen_ai_client_operation_time_to_first_chunk_seconds"},
		{"experimental", MetricInferenceDuration, UnitSeconds, "gen_ai_client_inference_duration_seconds"},
		{"no unit", "mesh.requests", "", "mesh_requests"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PrometheusName(c.metric, c.unit); got != c.want {
				t.Errorf("PrometheusName(%q, %q) = %q, want %q", c.metric, c.unit, got, c.want)
			}
		})
	}
	if got := PrometheusLabel(AttrTokenType); got != "gen_ai_token_type" {
		t.Errorf("PrometheusLabel(%q) = %q", AttrTokenType, got)
	}
	if got := PrometheusLabel("0x.y-z"); got != "_x_y_z" {
		t.Errorf("PrometheusLabel(0x.y-z) = %q", got)
	}
}
