package config

import (
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/structured"
)

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // every error line, in order
	}{
		{
			name: "server fields",
			yaml: `server:
  listen: localhost
  max_body_bytes: -1
  shutdown_timeout: -5s
  log_format: xml
  log_level: verbose
`,
			want: []string{
				`keel.yaml:2:3: server.listen: expected host:port such as "127.0.0.1:7878" or ":7878", got "localhost"`,
				`keel.yaml:3:3: server.max_body_bytes: must not be negative, got -1`,
				`keel.yaml:4:3: server.shutdown_timeout: must not be negative, got -5s`,
				`keel.yaml:5:3: server.log_format: expected text or json, got "xml"`,
				`keel.yaml:6:3: server.log_level: expected debug, info, warn or error, got "verbose"`,
			},
		},
		{
			name: "key and cache stores",
			yaml: `keys:
  store: redis
cache:
  enabled: true
  store: disk
`,
			want: []string{
				`keel.yaml:2:3: keys.store: redis needs the redis section (redis.url)`,
				`keel.yaml:5:3: cache.store: expected memory or redis, got "disk"`,
			},
		},
		{
			name: "responses section",
			yaml: `responses:
  store_ttl: -1h
  max_conversations: -1
  max_stored_bytes: -5
  store: redis
`,
			want: []string{
				`keel.yaml:2:3: responses.store_ttl: must not be negative, got -1h0m0s`,
				`keel.yaml:3:3: responses.max_conversations: must not be negative, got -1`,
				`keel.yaml:4:3: responses.max_stored_bytes: must not be negative, got -5`,
				`keel.yaml:5:3: responses.store: redis needs the redis section (redis.url)`,
			},
		},
		{
			name: "responses store",
			yaml: `responses:
  store: sqlite
`,
			want: []string{
				`keel.yaml:2:3: responses.store: sqlite keeps the conversations in the request log's file: it needs the request log (request_log.path)`,
			},
		},
		{
			name: "responses store unknown",
			yaml: `responses:
  store: disk
`,
			want: []string{
				`keel.yaml:2:3: responses.store: expected memory, sqlite or redis, got "disk"`,
			},
		},
		{
			name: "server access and body limits",
			yaml: `server:
  max_body_bytes: 1000
  body_read_timeout: -1s
  min_body_rate_bytes_per_sec: -1
  max_inflight_body_bytes: 999
  max_messages: -2
  max_header_bytes: 2000000
  allowed_hosts: [api.example.com, "", "http://x.example"]
  allowed_origins: ["https://ok.example", "ok.example", "https://x.example/path", "*", "null"]
`,
			want: []string{
				`keel.yaml:3:3: server.body_read_timeout: must not be negative, got -1s`,
				`keel.yaml:4:3: server.min_body_rate_bytes_per_sec: must not be negative, got -1`,
				`keel.yaml:5:3: server.max_inflight_body_bytes: must be at least server.max_body_bytes (1000), got 999`,
				`keel.yaml:6:3: server.max_messages: must not be negative, got -2`,
				`keel.yaml:7:3: server.max_header_bytes: expected 0 to 1048576 (net/http's own limit), got 2000000`,
				`keel.yaml:8:36: server.allowed_hosts[1]: expected a host name, name:port, *.domain or *, got ""`,
				`keel.yaml:8:40: server.allowed_hosts[2]: expected a host name, name:port, *.domain or *, got "http://x.example"`,
				`keel.yaml:9:43: server.allowed_origins[1]: expected an origin such as https://app.example.com, or *, got "ok.example"`,
				`keel.yaml:9:57: server.allowed_origins[2]: expected an origin such as https://app.example.com, or *, got "https://x.example/path"`,
			},
		},
		{
			name: "model kinds",
			yaml: `providers:
  - {name: a, type: anthropic, api_key: k}
  - {name: o, type: openai, api_key: k}
models:
  - {name: chat, endpoints: [{provider: a}]}
  - {name: emb, kind: embedding, endpoints: [{provider: o}, {provider: a, region: eu}]}
  - {name: odd, kind: vision, endpoints: [{provider: o}]}
aliases:
  - {name: both, models: [chat, emb]}
  - name: tiered
    tiering: {tiers: {cheap: emb, middle: chat, strong: chat}}
`,
			want: []string{
				`keel.yaml:6:62: models[1].endpoints[1].provider: provider "a" is of type anthropic: an embedding model is served by the Embeddings API of an openai provider`,
				`keel.yaml:7:17: models[2].kind: expected chat or embedding, got "vision"`,
				`keel.yaml:9:33: aliases[0].models[1]: "emb" is an embedding model: an alias is a fallback chain of chat models`,
				`keel.yaml:11:23: aliases[1].tiering.tiers.cheap: "emb" is an embedding model: a tier names a chat model`,
			},
		},
		{
			name: "redis",
			yaml: "redis:\n  url: http://127.0.0.1:6379\n  key_prefix: 'a b*'\n  timeout: -1s\n",
			want: []string{
				`keel.yaml:2:3: redis.url: expected the scheme redis, rediss or unix, got "http"`,
				`keel.yaml:3:3: redis.key_prefix: must not contain spaces or the glob characters * ? [`,
				`keel.yaml:4:3: redis.timeout: must not be negative, got -1s`,
			},
		},
		{
			name: "redis without url",
			yaml: "redis:\n  key_prefix: k\n",
			want: []string{`keel.yaml:1:1: redis.url: required when the redis section sets other keys`},
		},
		{
			name: "redis url from env without host",
			yaml: "redis:\n  url: ${KEEL_TEST_REDIS}\n",
			env:  map[string]string{"KEEL_TEST_REDIS": "redis://"},
			want: []string{`keel.yaml:2:3: redis.url: names no host`},
		},
		{
			name: "listen port out of range",
			yaml: "server:\n  listen: ':70000'\n",
			want: []string{`keel.yaml:2:3: server.listen: expected host:port such as "127.0.0.1:7878" or ":7878", got port "70000" (expected a number from 0 to 65535)`},
		},
		{
			name: "provider type unknown and missing",
			yaml: `providers:
  - name: a
    type: palm
  - name: b
`,
			want: []string{
				`keel.yaml:3:5: providers[0].type: unknown provider type "palm": expected anthropic, openai, azure or gemini`,
				`keel.yaml:4:5: providers[1].type: required: expected anthropic, openai, azure or gemini`,
			},
		},
		{
			name: "provider name missing invalid duplicate",
			yaml: `providers:
  - type: openai
  - name: a/b
    type: openai
  - name: x
    type: openai
  - name: x
    type: anthropic
`,
			want: []string{
				`keel.yaml:2:5: providers[0].name: required: every provider needs a name`,
				`keel.yaml:3:5: providers[1].name: invalid provider name "a/b": expected letters, digits, '.', '_' and '-'`,
				`keel.yaml:7:5: providers[3].name: duplicate provider name "x" (first defined at providers[2], line 5)`,
			},
		},
		{
			name: "provider base_url",
			yaml: `providers:
  - {name: a, type: openai, base_url: "localhost:8000"}
  - {name: b, type: openai, base_url: "ftp://example.com"}
  - {name: c, type: openai, base_url: "https://"}
  - {name: d, type: openai, base_url: "https://user:hunter2@example.com/v1"}
  - {name: e, type: openai, base_url: "/v1"}
  - {name: f, type: openai, base_url: "http://x/v1?a=1"}
`,
			want: []string{
				`keel.yaml:2:29: providers[0].base_url: expected an absolute http or https URL such as "https://api.anthropic.com", got scheme "localhost"`,
				`keel.yaml:3:29: providers[1].base_url: expected an absolute http or https URL such as "https://api.anthropic.com", got scheme "ftp"`,
				`keel.yaml:4:29: providers[2].base_url: expected an absolute http or https URL such as "https://api.anthropic.com", got no host`,
				`keel.yaml:5:29: providers[3].base_url: must not carry credentials (user:password@): put them in api_key or headers, which are kept secret`,
				`keel.yaml:6:29: providers[4].base_url: expected an absolute http or https URL such as "https://api.anthropic.com", got no scheme`,
				`keel.yaml:7:29: providers[5].base_url: expected an absolute http or https URL such as "https://api.anthropic.com" without query or fragment`,
			},
		},
		{
			name: "api key both set and env name invalid",
			yaml: `providers:
  - name: a
    type: anthropic
    api_key: sk-literal
    api_key_env: ANTHROPIC_API_KEY
  - name: b
    type: anthropic
    api_key_env: sk-ant-pasted-key
`,
			want: []string{
				`keel.yaml:5:5: providers[0].api_key_env: api_key and api_key_env are mutually exclusive: set one of them`,
				`keel.yaml:8:5: providers[1].api_key_env: expected the name of an environment variable such as ANTHROPIC_API_KEY (letters, digits and '_'); a literal key belongs in api_key`,
			},
		},
		{
			name: "api",
			yaml: `providers:
  - {name: a, type: anthropic, api: responses}
  - {name: b, type: openai, api: assistants}
  - {name: c, type: openai, api: responses}
  - {name: d, type: openai, api: chat_completions}
`,
			want: []string{
				`keel.yaml:2:32: providers[0].api: applies only to providers of type openai or azure`,
				`keel.yaml:3:29: providers[1].api: unknown api "assistants": expected chat_completions or responses`,
			},
		},
		{
			name: "azure",
			yaml: `providers:
  - {name: a, type: azure, api_key: k}
  - {name: b, type: azure, base_url: "https://r.openai.azure.com", api_key: k}
  - {name: c, type: azure, base_url: "https://r.openai.azure.com/openai/v1", api_version: "2024-10-21", api_key: k}
  - {name: d, type: azure, base_url: "https://r.openai.azure.com/openai/v1"}
  - {name: e, type: azure, base_url: "https://r.openai.azure.com/openai/v1", auth: entra, api_key_env: K}
  - {name: f, type: azure, base_url: "https://r.openai.azure.com/openai/v1", auth: oauth}
  - {name: g, type: openai, api_version: "2024-10-21", auth: entra}
  - {name: h, type: azure, base_url: "https://r.openai.azure.com", api_version: "2024-10-21", api_key: k, api: responses}
  - {name: i, type: azure, base_url: "https://r.openai.azure.com/openai/v1/", auth: entra}
  - {name: j, type: gemini}
  - {name: k, type: gemini, api_key_env: GEMINI_API_KEY}
models:
  - {name: m, content_filter: retry, endpoints: [{provider: h}]}
  - {name: n, content_filter: fallback, endpoints: [{provider: i}]}
`,
			want: []string{
				`keel.yaml:2:6: providers[0].base_url: required for azure: the resource endpoint, https://{resource}.openai.azure.com (with api_version) or https://{resource}.openai.azure.com/openai/v1`,
				`keel.yaml:3:6: providers[1].api_version: required with deployment URLs (Azure answers a call without api-version with 404), e.g. "2024-10-21"; or end base_url in /openai/v1 for the v1 surface`,
				`keel.yaml:4:78: providers[2].api_version: the v1 surface (base_url ending in /openai/v1) takes no api_version: remove it, or use the resource endpoint as base_url`,
				`keel.yaml:5:6: providers[3].auth: azure with auth api_key needs api_key or api_key_env (or set auth: entra)`,
				`keel.yaml:6:78: providers[4].auth: auth entra takes no api_key or api_key_env: the token comes from the Azure credential chain`,
				`keel.yaml:7:78: providers[5].auth: expected api_key or entra, got "oauth"`,
				`keel.yaml:8:29: providers[6].api_version: applies only to providers of type azure`,
				`keel.yaml:8:56: providers[6].auth: applies only to providers of type azure`,
				`keel.yaml:11:6: providers[9].api_key: a gemini provider needs api_key or api_key_env (the Gemini API key, sent in x-goog-api-key), or a vertex section (Gemini on Vertex AI)`,
				`keel.yaml:14:15: models[0].content_filter: expected fail or fallback, got "retry"`,
			},
		},
		{
			name: "anthropic_version",
			yaml: `providers:
  - {name: a, type: openai, anthropic_version: "2023-06-01"}
  - {name: b, type: anthropic, anthropic_version: latest}
  - {name: c, type: anthropic, anthropic_version: client}
  - {name: d, type: anthropic, anthropic_version: "2026-10-21"}
`,
			want: []string{
				`keel.yaml:2:29: providers[0].anthropic_version: applies only to providers of type anthropic`,
				`keel.yaml:3:32: providers[1].anthropic_version: expected a date such as "2023-06-01" or "client", got "latest"`,
			},
		},
		{
			name: "bedrock and vertex",
			yaml: `providers:
  - {name: a, type: openai, bedrock: {region: us-east-1}}
  - {name: b, type: anthropic, bedrock: {}, vertex: {region: global}}
  - {name: c, type: anthropic, vertex: {project: p}}
  - {name: d, type: anthropic, api_key: k, vertex: {region: global}}
  - {name: e, type: anthropic, anthropic_version: bedrock-2023-05-31, bedrock: {region: us-east-1}}
  - {name: f, type: anthropic, anthropic_version: vertex-2023-10-16, vertex: {region: us-east5}}
  - {name: g, type: anthropic, anthropic_version: vertex-2023-10-16, bedrock: {region: us-east-1}}
`,
			want: []string{
				`keel.yaml:2:29: providers[0].bedrock: applies only to providers of type anthropic (Claude on Amazon Bedrock or Google Vertex AI)`,
				`keel.yaml:3:45: providers[1].vertex: bedrock and vertex are mutually exclusive: a provider is one account`,
				`keel.yaml:4:32: providers[2].vertex.region: required: the Vertex AI location (global, us-east5, europe-west1, …)`,
				`keel.yaml:5:32: providers[3].api_key: does not apply to vertex: Vertex AI takes OAuth2 tokens (vertex.credentials_file or Application Default Credentials)`,
				`keel.yaml:8:32: providers[6].anthropic_version: expected a date such as "2023-06-01" or "client", got "vertex-2023-10-16"`,
			},
		},
		{
			name: "headers",
			yaml: `providers:
  - name: a
    type: openai
    headers:
      "Bad Name": x
      X-Multi: "${KEEL_TEST_MULTILINE}"
      x-multi: again
`,
			env: map[string]string{"KEEL_TEST_MULTILINE": "a\r\nInjected: yes"},
			want: []string{
				`keel.yaml:5:7: providers[0].headers.Bad Name: invalid header name: expected letters, digits and !#$%&'*+-.^_` + "`" + `|~`,
				`keel.yaml:6:7: providers[0].headers.X-Multi: header value must not contain line breaks or NUL`,
				`keel.yaml:7:7: providers[0].headers.x-multi: duplicate header: "X-Multi" and "x-multi" name the same header`,
			},
		},
		{
			name: "negative timeouts and connection limits",
			yaml: `providers:
  - name: a
    type: openai
    timeouts:
      connect: -1s
      response_header: -1ms
      stream_idle: -2s
      request: -1m
    max_conns_per_host: -1
    max_idle_conns_per_host: -2
    http_client: fast
`,
			want: []string{
				`keel.yaml:5:7: providers[0].timeouts.connect: must not be negative, got -1s`,
				`keel.yaml:6:7: providers[0].timeouts.response_header: must not be negative, got -1ms`,
				`keel.yaml:7:7: providers[0].timeouts.stream_idle: must not be negative, got -2s`,
				`keel.yaml:8:7: providers[0].timeouts.request: must not be negative, got -1m0s`,
				`keel.yaml:9:5: providers[0].max_conns_per_host: must not be negative, got -1`,
				`keel.yaml:10:5: providers[0].max_idle_conns_per_host: must not be negative, got -2`,
				`keel.yaml:11:5: providers[0].http_client: expected lean or standard, got "fast"`,
			},
		},
		{
			name: "continuation",
			yaml: `providers:
  - {name: a, type: openai, continuation: continue_final_message}
  - {name: b, type: openai, continuation: prefil}
  - {name: c, type: anthropic, continuation: ""}
`,
			want: []string{
				`keel.yaml:3:29: providers[1].continuation: expected prefill, continue_final_message, prefix or none, got "prefil"`,
			},
		},
		{
			name: "resilience policies checked by their constructors",
			yaml: `resilience:
  retry_budget: {ratio: 0.0001}
  hedge_budget:
    ratio: 0.5
    burst: 0.5
  hedge_floor: 3s
  breaker:
    min_requests: -1
    failure_rate: 1.5
    window: 5ms
    open_for: 2m
`,
			want: []string{
				`keel.yaml:2:18: resilience.retry_budget.ratio: budget ratio 0.0001 outside [0.001, 1000]`,
				`keel.yaml:5:5: resilience.hedge_budget.burst: budget burst 0.5 outside [1, 1e12]`,
				`keel.yaml:6:3: resilience.hedge_floor: hedge floor 3s is above ceiling 2s`,
				`keel.yaml:8:5: resilience.breaker.min_requests: breaker min requests -1 below 1`,
				`keel.yaml:9:5: resilience.breaker.failure_rate: breaker failure rate 1.5 outside (0, 1]`,
				`keel.yaml:10:5: resilience.breaker.window: breaker window 5ms shorter than 1ms per bucket`,
				`keel.yaml:11:5: resilience.breaker.open_for: breaker max open interval 1m0s below open interval 2m0s`,
			},
		},
		{
			name: "cache affinity and cold spend checked by their packages",
			yaml: "resilience:\n  cache_affinity:\n    max_slowdown: 0.5\n  cold_spend:\n    ratio: -1\n    burst_usd: 2000000\n",
			want: []string{
				`keel.yaml:3:5: resilience.cache_affinity.max_slowdown: max slowdown 0.5 outside [1, 1000]`,
				`keel.yaml:5:5: resilience.cold_spend.ratio: cold spend ratio -1 outside (0, 1000]`,
				`keel.yaml:6:5: resilience.cold_spend.burst_usd: cold spend burst 2e+06 outside (0, 1e+06]`,
			},
		},
		{
			name: "safety valve threshold out of range",
			yaml: "resilience:\n  safety_valve:\n    window: 30s\n    threshold: 1.5\n",
			want: []string{`keel.yaml:4:5: resilience.safety_valve.threshold: expected a number between 0 and 1, got 1.5`},
		},
		{
			name: "negative safety valve threshold",
			yaml: "resilience:\n  safety_valve: {threshold: -0.1}\n",
			want: []string{`keel.yaml:2:18: resilience.safety_valve.threshold: expected a number between 0 and 1, got -0.1`},
		},
		{
			name: "hedge bounds that disagree with each other",
			yaml: "resilience:\n  hedge_floor: 1s\n  hedge_ceiling: 500ms\n",
			want: []string{`keel.yaml:2:3: resilience.hedge_floor: hedge floor 1s is above ceiling 500ms`},
		},
		{
			name: "slow stream threshold too low",
			yaml: "resilience:\n  slow_stream_threshold: 1.5\n",
			want: []string{`keel.yaml:2:3: resilience.slow_stream_threshold: slow stream threshold 1.5 below 2`},
		},
		{
			name: "negative hedge ceiling",
			yaml: "resilience:\n  hedge_ceiling: -1s\n",
			want: []string{`keel.yaml:2:3: resilience.hedge_ceiling: hedge floor 20ms and ceiling -1s must not be negative`},
		},
		{
			name: "model fields",
			yaml: `providers: [{name: a, type: openai}]
models:
  - name: m1
    capability: 6
    context_window: -1
    price: {input_per_mtok: -1, output_per_mtok: -0.5}
    endpoints: [{provider: a}]
  - name: m2
    capability: -1
    endpoints: [{provider: a}]
  - name: "has space"
    endpoints: [{provider: a}]
  - capability: 2
    endpoints: [{provider: a}]
`,
			want: []string{
				`keel.yaml:4:5: models[0].capability: expected a tier from 1 to 5, got 6`,
				`keel.yaml:5:5: models[0].context_window: must not be negative, got -1`,
				`keel.yaml:6:13: models[0].price.input_per_mtok: expected a price of 0 or more US dollars per million tokens, got -1`,
				`keel.yaml:6:33: models[0].price.output_per_mtok: expected a price of 0 or more US dollars per million tokens, got -0.5`,
				`keel.yaml:9:5: models[1].capability: expected a tier from 1 to 5, got -1`,
				`keel.yaml:11:5: models[2].name: invalid model name "has space": must not contain spaces or control characters`,
				`keel.yaml:13:5: models[3].name: required: every model needs a name`,
			},
		},
		{
			name: "pricing and keys",
			yaml: `pricing:
  - {model: gpt-4o, input_per_mtok: 2, output_per_mtok: 8, cache_read_per_mtok: -1}
  - {model: gpt-4o, input_per_mtok: 2}
  - {input_per_mtok: 1, cache_write_per_mtok: -2}
keys:
  refresh_interval: -1s
`,
			want: []string{
				`keel.yaml:2:60: pricing[0].cache_read_per_mtok: expected a price of 0 or more US dollars per million tokens, got -1`,
				`keel.yaml:3:6: pricing[1].model: model "gpt-4o" is priced twice`,
				`keel.yaml:4:6: pricing[2].model: required: the model name as sent upstream`,
				`keel.yaml:4:25: pricing[2].cache_write_per_mtok: expected a price of 0 or more US dollars per million tokens, got -2`,
				`keel.yaml:6:3: keys.refresh_interval: must not be negative, got -1s`,
			},
		},
		{
			name: "endpoints",
			yaml: `providers: [{name: anthropic, type: anthropic}]
models:
  - name: m
  - name: n
    endpoints:
      - provider: antropic
      - region: us
      - {provider: anthropic, region: "eu/west"}
      - {provider: anthropic, base_url: "grpc://x"}
      - {provider: anthropic, region: default}
  - name: m
    endpoints: [{provider: anthropic}]
`,
			want: []string{
				`keel.yaml:3:5: models[0].endpoints: required: at least one endpoint`,
				`keel.yaml:6:9: models[1].endpoints[0].provider: unknown provider "antropic" (did you mean "anthropic"?)`,
				`keel.yaml:7:9: models[1].endpoints[1].provider: required: expected the name of a provider`,
				`keel.yaml:8:31: models[1].endpoints[2].region: invalid region "eu/west": expected letters, digits, '.', '_' and '-'`,
				`keel.yaml:9:31: models[1].endpoints[3].base_url: expected an absolute http or https URL such as "https://api.anthropic.com", got scheme "grpc"`,
				`keel.yaml:10:10: models[1].endpoints[4]: duplicate endpoint n/default/anthropic: each provider may serve a model once per region`,
				`keel.yaml:11:5: models[2].name: duplicate model name "m" (first defined at models[0], line 3)`,
			},
		},
		{
			name: "alias tiering",
			yaml: `providers: [{name: a, type: openai}]
models:
  - {name: m1, endpoints: [{provider: a}]}
  - {name: m2, endpoints: [{provider: a}]}
aliases:
  - name: tiered
    tiering:
      tiers: {cheap: m1, middle: m3, strong: other}
      escalate: true
  - name: other
    models: [m2]
`,
			want: []string{
				`keel.yaml:8:26: aliases[0].tiering.tiers.middle: unknown model "m3" (did you mean "m1"?)`,
				`keel.yaml:8:38: aliases[0].tiering.tiers.strong: "other" is an alias: a tier names a model`,
			},
		},
		{
			name: "alias shadow",
			yaml: `providers: [{name: a, type: openai}]
models:
  - {name: m1, endpoints: [{provider: a}]}
  - {name: m2, endpoints: [{provider: a}]}
aliases:
  - name: x
    models: [m1]
    shadow: {percent: 110, target: {model: m3}, decision_rule: "confidence_score >="}
  - name: y
    models: [m1]
    shadow:
      percent: 10
      target: {model: m2, legacy: true}
  - name: z
    models: [m1]
    shadow: {percent: 0.5, target: {alias: y}, decision_rule: "confidence_score >= 0.8"}
shadow: {workers: -1, timeout: -1s}
`,
			want: []string{
				`keel.yaml:8:14: aliases[0].shadow.percent: expected 0-100, got 110`,
				`keel.yaml:8:37: aliases[0].shadow.target.model: unknown model "m3" (did you mean "m1"?)`,
				`keel.yaml:8:49: aliases[0].shadow.decision_rule: decision rule at byte 19: want a literal after >=, got ""`,
				`keel.yaml:13:7: aliases[1].shadow.target: set exactly one of model, alias or legacy: true`,
				`keel.yaml:17:10: shadow.workers: must not be negative, got -1`,
				`keel.yaml:17:23: shadow.timeout: must not be negative, got -1s`,
			},
		},
		{
			name: "aliases",
			yaml: `providers: [{name: a, type: openai}]
models:
  - {name: m1, endpoints: [{provider: a}]}
  - {name: m2, endpoints: [{provider: a}]}
aliases:
  - name: m1
    models: [m2]
  - name: chain
    models: [m1, m3, chain2, m1]
    strategy: fastest
  - name: chain2
    models: []
  - name: chain2
    models: [m2]
  - models: [m1]
`,
			want: []string{
				`keel.yaml:6:5: aliases[0].name: alias name "m1" is also a model name: names must be unique across models and aliases`,
				`keel.yaml:9:18: aliases[1].models[1]: unknown model "m3" (did you mean "m1"?)`,
				`keel.yaml:9:22: aliases[1].models[2]: "chain2" is an alias: an alias lists models, not other aliases`,
				`keel.yaml:9:30: aliases[1].models[3]: model "m1" listed twice`,
				`keel.yaml:10:5: aliases[1].strategy: expected ordered or latency, got "fastest"`,
				`keel.yaml:12:5: aliases[2].models: required: at least one model`,
				`keel.yaml:13:5: aliases[3].name: duplicate alias name "chain2" (first defined at aliases[2], line 11)`,
				`keel.yaml:15:5: aliases[4].name: required: every alias needs a name`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrors(t, tt.yaml, tt.env)
			if d := diffLines(got, tt.want); d != "" {
				t.Errorf("Parse errors mismatch (-got +want):\n%s", d)
			}
		})
	}
}

// TestValidateInCode checks a Config built without a file: errors carry
// paths but no positions, and zero fields count as their defaults.
func TestValidateInCode(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{name: "zero config is valid", cfg: Config{}},
		{
			name: "zero fields are defaults",
			cfg: Config{
				Providers: []Provider{{Name: "a", Type: TypeOpenAI}},
				Models:    []Model{{Name: "m", Endpoints: []Endpoint{{Provider: "a"}}}},
				Aliases:   []Alias{{Name: "x", Models: []string{"m"}}},
			},
		},
		{
			name: "problems without positions",
			cfg: Config{
				Server:    Server{Listen: "nope"},
				Providers: []Provider{{Name: "a", Type: "bedrock"}},
				Models:    []Model{{Name: "m", Capability: 9, Endpoints: []Endpoint{{Provider: "b"}}}},
			},
			want: []string{
				`server.listen: expected host:port such as "127.0.0.1:7878" or ":7878", got "nope"`,
				`providers[0].type: unknown provider type "bedrock": expected anthropic, openai, azure or gemini`,
				`models[0].capability: expected a tier from 1 to 5, got 9`,
				`models[0].endpoints[0].provider: unknown provider "b" (did you mean "a"?)`,
			},
		},
		{
			name: "policy problems without positions",
			cfg: Config{Resilience: Resilience{
				RetryBudget: resilience.BudgetConfig{Burst: -1},
				Breaker:     resilience.BreakerConfig{Buckets: 2000},
			}},
			want: []string{
				`resilience.retry_budget.burst: budget burst -1 outside [1, 1e12]`,
				`resilience.breaker: breaker buckets 2000 outside [1, 1000]`,
			},
		},
		{
			name: "typed modes built in code are checked by their own UnmarshalText",
			cfg: Config{
				StructuredOutput: StructuredOutput{StreamMode: "buffered", Implied: "always", OnViolation: "ignore", ImpliedSchemas: new(bool),
					Limits: structured.Limits{MaxRefs: -2}},
				Normalization: Normalization{ParameterPolicy: "clamp"},
				Resilience:    Resilience{Rollout: Rollout{Stage: "half"}},
			},
			want: []string{
				`resilience.rollout.stage: rollout stage "half": want monitor, hedging or full`,
				`normalization.parameter_policy: expected drop, map or reject, got "clamp"`,
				`structured_output.stream_mode: expected strict or relaxed, got "buffered"`,
				`structured_output.implied: expected off, guess, send or strict, got "always"`,
				`structured_output.on_violation: expected error or pass, got "ignore"`,
				`structured_output.max_schema_refs: expected a positive number (0 = the default), got -2`,
			},
		},
		{
			name: "duplicate without positions",
			cfg: Config{
				Providers: []Provider{{Name: "a", Type: TypeOpenAI}, {Name: "a", Type: TypeOpenAI}},
			},
			want: []string{`providers[1].name: duplicate provider name "a" (first defined at providers[0])`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if d := diffLines(got, tt.want); d != "" {
				t.Errorf("Validate mismatch (-got +want):\n%s", d)
			}
		})
	}
}

// TestRequestLogOn: the request log is written when enabled says so, or,
// enabled unset, when a path is named; never by default.
func TestRequestLogOn(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name string
		rl   RequestLog
		want bool
	}{
		{name: "default is off", rl: RequestLog{}, want: false},
		{name: "a path turns it on", rl: RequestLog{Path: "requests.db"}, want: true},
		{name: "enabled without path", rl: RequestLog{Enabled: &on}, want: true},
		{name: "disabled wins over a path", rl: RequestLog{Enabled: &off, Path: "requests.db"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rl.On(); got != tt.want {
				t.Errorf("On() = %v, want %v", got, tt.want)
			}
		})
	}
}

// keys.store and cache.store default to redis when a redis section is set
// (embedded configs built in Go included), else to sqlite and memory.
func TestStoreDefaults(t *testing.T) {
	var c Config
	if c.KeysStore() != KeysStoreSQLite || c.CacheStore() != CacheStoreMemory {
		t.Errorf("without redis: %q %q, want sqlite memory", c.KeysStore(), c.CacheStore())
	}
	c.Redis.URL = "redis://127.0.0.1:6379"
	if c.KeysStore() != KeysStoreRedis || c.CacheStore() != CacheStoreRedis {
		t.Errorf("with redis: %q %q, want redis redis", c.KeysStore(), c.CacheStore())
	}
	c.Keys.Store, c.Cache.Store = KeysStoreSQLite, CacheStoreMemory
	if c.KeysStore() != KeysStoreSQLite || c.CacheStore() != CacheStoreMemory {
		t.Errorf("set explicitly: %q %q, want sqlite memory", c.KeysStore(), c.CacheStore())
	}
}

// responses.store defaults to redis with a redis section, else to sqlite
// (the request log's file) when the log is written, else memory.
func TestResponsesStoreDefault(t *testing.T) {
	var c Config
	if got := c.ResponsesStore(); got != "memory" {
		t.Errorf("embedded, no log: %q, want memory", got)
	}
	c.RequestLog.Path = "keel-requests.db"
	if got := c.ResponsesStore(); got != "sqlite" {
		t.Errorf("with the request log: %q, want sqlite", got)
	}
	c.Redis.URL = "redis://127.0.0.1:6379"
	if got := c.ResponsesStore(); got != "redis" {
		t.Errorf("with redis: %q, want redis", got)
	}
	c.Responses.Store = "memory"
	if got := c.ResponsesStore(); got != "memory" {
		t.Errorf("set explicitly: %q, want memory", got)
	}
}

// A config that serves nothing is refused (issue 25): keel serve calls
// CheckServes at start and on reload, and the error names the key to fix.
func TestCheckServes(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string // "" for a config that serves
	}{
		{name: "only a server section", yaml: "server:\n  listen: 127.0.0.1:8080\n",
			want: "keel.yaml: providers: none configured, so this config serves no model"},
		{name: "empty providers", yaml: "server:\n  listen: 127.0.0.1:8080\nproviders: []\n",
			want: "keel.yaml:3:1: providers: none configured, so this config serves no model"},
		{name: "providers pass model names through", yaml: "providers:\n  - {name: a, type: anthropic}\n"},
		{name: "a model and its endpoint", yaml: "providers:\n  - {name: a, type: anthropic}\nmodels:\n  - name: m\n    endpoints: [{provider: a}]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "keel.yaml")
			if err != nil {
				t.Fatal(err)
			}
			err = c.CheckServes()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("got %v, want an error starting %q", err, tc.want)
			}
		})
	}
	// Every model without an endpoint: refused by Parse, at the model's line.
	_, err := Parse([]byte("providers:\n  - {name: a, type: anthropic}\nmodels:\n  - name: m\n"), "keel.yaml")
	if err == nil || !strings.Contains(err.Error(), "keel.yaml:4:5: models[0].endpoints: required: at least one endpoint") {
		t.Errorf("a model without endpoints: %v", err)
	}
}
