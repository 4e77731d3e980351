{{/* The chart name, shortened to Kubernetes' 63-character label limit. */}}
{{- define "keel.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The resources' base name: RELEASE-keel, or RELEASE when it already says keel. */}}
{{- define "keel.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels every resource carries. */}}
{{- define "keel.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "keel.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select the pods (immutable in a Deployment). */}}
{{- define "keel.selectorLabels" -}}
app.kubernetes.io/name: {{ include "keel.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The Secret the chart creates for the tokens and the Redis URL given as values. */}}
{{- define "keel.secretName" -}}
{{- include "keel.fullname" . }}
{{- end }}

{{/* The Secret the chart creates for providerKeys.values. */}}
{{- define "keel.envSecretName" -}}
{{- printf "%s-env" (include "keel.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Whether the chart creates its Secret: some token or the Redis URL is given as a value. */}}
{{- define "keel.createsSecret" -}}
{{- if or (and (not .Values.adminToken.existingSecret) .Values.adminToken.value) (and (not .Values.readToken.existingSecret) .Values.readToken.value) (and (eq .Values.redis.mode "external") (not .Values.redis.url.existingSecret) .Values.redis.url.value) }}true{{ end }}
{{- end }}

{{/*
A secret reference ({existingSecret, key, value}) as an env var's
valueFrom.secretKeyRef: the Secret you manage, else the chart's under
chartKey. Call with (dict "ref" REF "chartKey" KEY "root" $).
*/}}
{{- define "keel.secretKeyRef" -}}
secretKeyRef:
{{- if .ref.existingSecret }}
  name: {{ .ref.existingSecret }}
  key: {{ .ref.key }}
{{- else }}
  name: {{ include "keel.secretName" .root }}
  key: {{ .chartKey }}
{{- end }}
{{- end }}

{{/* Whether a secret reference is set. */}}
{{- define "keel.refSet" -}}
{{- if or .existingSecret .value }}true{{ end }}
{{- end }}

{{/* The pods that may run at once exceed one. */}}
{{- define "keel.multiPod" -}}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/*
GOMEMLIMIT in bytes: goMemLimitPercent of resources.limits.memory, a
Kubernetes quantity with a binary (Ki, Mi, Gi, Ti) or decimal (k, M, G, T)
suffix or none. Empty when there is no memory limit or the percentage is 0.
*/}}
{{- define "keel.goMemLimit" -}}
{{- $limits := (.Values.resources | default dict).limits | default dict }}
{{- if and $limits.memory (gt (int .Values.goMemLimitPercent) 0) }}
{{- $m := toString $limits.memory }}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 }}
{{- $num := regexFind "^[0-9]+" $m }}
{{- $suffix := trimPrefix $num $m }}
{{- if or (not $num) (not (hasKey $units $suffix)) }}
{{- fail (printf "resources.limits.memory %q: write a whole number with an optional Ki, Mi, Gi, Ti, k, M, G or T suffix, such as 512Mi, to set GOMEMLIMIT from it (or set goMemLimitPercent: 0)" $m) }}
{{- end }}
{{- div (mul (int64 $num) (get $units $suffix) (int64 .Values.goMemLimitPercent)) 100 }}
{{- end }}
{{- end }}

{{/*
Keel's configuration: .Values.config with the keys the chart owns set from
the values above. Secrets appear as ${VARIABLE} only.
*/}}
{{- define "keel.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $server := get $cfg "server" | default dict }}
{{- range $k, $by := dict "listen" "containerPort" "drain_delay" "shutdown.drainDelaySeconds (the preStop hook)" "shutdown_timeout" "shutdown.shutdownTimeoutSeconds" "admin_token" "adminToken" "read_token" "readToken" }}
{{- if hasKey $server $k }}
{{- fail (printf "config.server.%s is set by the chart: use %s instead" $k $by) }}
{{- end }}
{{- end }}
{{- $_ := set $server "listen" (printf "0.0.0.0:%d" (int .Values.containerPort)) }}
{{- $_ := set $server "drain_delay" "0s" }}
{{- $_ := set $server "shutdown_timeout" (printf "%ds" (int .Values.shutdown.shutdownTimeoutSeconds)) }}
{{- if not (hasKey $server "log_format") }}
{{- $_ := set $server "log_format" "json" }}
{{- end }}
{{- if include "keel.refSet" .Values.adminToken }}
{{- $_ := set $server "admin_token" "${KEEL_ADMIN_TOKEN}" }}
{{- end }}
{{- if include "keel.refSet" .Values.readToken }}
{{- $_ := set $server "read_token" "${KEEL_READ_TOKEN}" }}
{{- end }}
{{- $_ := set $cfg "server" $server }}
{{- $redis := get $cfg "redis" | default dict }}
{{- if hasKey $redis "url" }}
{{- fail "config.redis.url is set by the chart: use redis.mode=external and redis.url instead" }}
{{- end }}
{{- if eq .Values.redis.mode "external" }}
{{- $_ := set $redis "url" "${KEEL_REDIS_URL}" }}
{{- $_ := set $cfg "redis" $redis }}
{{- else if $redis }}
{{- fail "config.redis is set but redis.mode is none: set redis.mode=external and redis.url" }}
{{- end }}
{{- $log := get $cfg "request_log" | default dict }}
{{- if not (hasKey $log "path") }}
{{- $_ := set $log "path" "/var/lib/keel/keel-requests.db" }}
{{- end }}
{{- $_ := set $cfg "request_log" $log }}
{{- toYaml $cfg }}
{{- end }}

{{/* The checks across values that the schema cannot say clearly. */}}
{{- define "keel.validate" -}}
{{- if and (include "keel.multiPod" .) (ne .Values.redis.mode "external") }}
{{- fail "more than one pod (replicaCount > 1 or autoscaling.enabled) needs redis.mode=external: without Redis each replica routes on its own view of the endpoints and has its own budgets, keys and cache" }}
{{- end }}
{{- if and (eq .Values.redis.mode "external") (not (include "keel.refSet" .Values.redis.url)) }}
{{- fail "redis.mode=external needs redis.url.existingSecret (and key) or redis.url.value" }}
{{- end }}
{{- if and ((.Values.config | default dict).server | default dict).require_keys (ne .Values.redis.mode "external") }}
{{- fail "config.server.require_keys needs redis.mode=external: without Redis the virtual keys would live in the pod's emptyDir and vanish with it" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not (include "keel.refSet" .Values.readToken)) }}
{{- fail "metrics.serviceMonitor.enabled needs readToken: off loopback Keel's /metrics answers 403 without a read token" }}
{{- end }}
{{- end }}
