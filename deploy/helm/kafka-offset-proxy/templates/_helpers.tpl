{{/* Names and labels, in the shape `helm create` gives them. */}}
{{- define "kop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kop.fullname" -}}
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

{{- define "kop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kop.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kop.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kop.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kop.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The chart's own Secret: tokens and passwords given inline in the values. */}}
{{- define "kop.secretName" -}}
{{- printf "%s-secrets" (include "kop.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kop.httpServiceName" -}}
{{- printf "%s-http" (include "kop.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kop.adminServiceName" -}}
{{- printf "%s-admin" (include "kop.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "true" when the offsets live in the embedded store (no store URL from the values or a Secret). */}}
{{- define "kop.embedded" -}}
{{- if and (not .Values.store.url) (not .Values.store.existingSecret) }}true{{ end }}
{{- end }}

{{/* The host clients are told for every broker (--advertised-host). */}}
{{- define "kop.advertisedHost" -}}
{{- if .Values.listener.advertisedHost }}
{{- .Values.listener.advertisedHost }}
{{- else if and (eq .Values.service.type "LoadBalancer") .Values.service.loadBalancerIP }}
{{- .Values.service.loadBalancerIP }}
{{- else if eq .Values.service.type "ClusterIP" }}
{{- printf "%s.%s.svc.%s" (include "kop.fullname" .) .Release.Namespace .Values.listener.clusterDomain }}
{{- else }}
{{- fail (printf "service.type %s: set listener.advertisedHost to the address clients outside the cluster reach (the load balancer's DNS name or address, or a name for the nodes)" .Values.service.type) }}
{{- end }}
{{- end }}

{{/*
The port plan as JSON: [{"name": "bootstrap", "port": P}, {"name": "broker-N", "node": N, "port": ...}].
Broker N is on listener.port + 1 + N unless brokers.ports maps it (the rule of proxy/core/broker-map.ts).
*/}}
{{- define "kop.ports" -}}
{{- $ids := list }}
{{- range .Values.brokers.nodeIds }}{{ $ids = append $ids (int .) }}{{ end }}
{{- with .Values.brokers.nodeIdRange }}
{{- if or (not (hasKey . "first")) (not (hasKey . "last")) }}
{{- fail "brokers.nodeIdRange needs first and last" }}
{{- end }}
{{- range untilStep (int .first) (int (add1 .last)) 1 }}{{ $ids = append $ids . }}{{ end }}
{{- end }}
{{- if not $ids }}
{{- fail "list the Kafka brokers' node ids in brokers.nodeIds or brokers.nodeIdRange: each needs its own port" }}
{{- end }}
{{- $base := int .Values.listener.port }}
{{- $ports := list (dict "name" "bootstrap" "port" $base) }}
{{- $seen := dict (toString $base) "bootstrap" (toString (int .Values.http.port)) "http" }}
{{- if .Values.http.admin.enabled }}
{{- if hasKey $seen (toString (int .Values.http.admin.port)) }}
{{- fail (printf "http.admin.port %d is already the %s port" (int .Values.http.admin.port) (get $seen (toString (int .Values.http.admin.port)))) }}
{{- end }}
{{- $_ := set $seen (toString (int .Values.http.admin.port)) "admin" }}
{{- end }}
{{- range $id := $ids | uniq }}
{{- $port := add $base 1 $id }}
{{- if hasKey $.Values.brokers.ports (toString $id) }}
{{- $port = int (get $.Values.brokers.ports (toString $id)) }}
{{- end }}
{{- if or (lt (int $port) 1) (gt (int $port) 65535) }}
{{- fail (printf "broker %d maps to port %d, outside 1-65535: give it a port in brokers.ports" $id $port) }}
{{- end }}
{{- if hasKey $seen (toString $port) }}
{{- fail (printf "broker %d's port %d is already the %s port" $id $port (get $seen (toString $port))) }}
{{- end }}
{{- $_ := set $seen (toString $port) (printf "broker %d" $id) }}
{{- $ports = append $ports (dict "name" (printf "broker-%d" $id) "node" $id "port" $port) }}
{{- end }}
{{- toJson $ports }}
{{- end }}

{{/* Where the TLS Secrets are mounted. */}}
{{- define "kop.brokerTlsDir" -}}/etc/kafka-offset-proxy/broker-tls{{- end }}
{{- define "kop.clientTlsDir" -}}/etc/kafka-offset-proxy/client-tls{{- end }}

{{/* --broker-port: the explicit node id -> port mappings of brokers.ports. */}}
{{- define "kop.brokerPortOption" -}}
{{- $pairs := list }}
{{- range $id, $port := .Values.brokers.ports }}{{ $pairs = append $pairs (printf "%s=%d" $id (int $port)) }}{{ end }}
{{- join "," $pairs }}
{{- end }}

{{/* The Secret and key of the HTTP token (a secretKeyRef's fields): there always is one. */}}
{{- define "kop.httpTokenRef" -}}
{{- if .Values.http.existingSecret }}
name: {{ .Values.http.existingSecret }}
key: {{ .Values.http.tokenKey }}
{{- else }}
name: {{ include "kop.secretName" . }}
key: http-token
{{- end }}
{{- end }}

{{/*
The HTTP token the chart generates when none is given (http.token, http.existingSecret), or nothing:
the one its Secret already holds (so an upgrade keeps it; `lookup` answers nothing under helm
template), else 32 random letters and digits. Without it the admin API could not change offsets
(the proxy refuses writes without a token) and /metrics would be open.
*/}}
{{- define "kop.generatedHttpToken" -}}
{{- if not (or .Values.http.token .Values.http.existingSecret) }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "kop.secretName" .) }}
{{- $kept := "" }}
{{- if $existing }}{{ $kept = index ($existing.data | default dict) "http-token" | default "" }}{{ end }}
{{- if $kept }}{{ $kept | b64dec }}{{ else }}{{ randAlphaNum 32 }}{{ end }}
{{- end }}
{{- end }}

{{/* The scrape endpoint of the ServiceMonitor and the PodMonitor. */}}
{{- define "kop.scrapeEndpoint" -}}
{{- $root := index . 0 }}
{{- $monitor := index . 1 }}
- port: http
  path: /metrics
  interval: {{ $monitor.interval }}
  {{- with $monitor.scrapeTimeout }}
  scrapeTimeout: {{ . }}
  {{- end }}
  {{- with include "kop.httpTokenRef" $root | trim }}
  authorization:
    type: Bearer
    credentials:
      {{- . | nindent 6 }}
  {{- end }}
{{- end }}
