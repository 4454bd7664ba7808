{{- define "ragmon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ragmon.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "ragmon.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "ragmon.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The recommended labels; pass (dict "root" $ "component" "collector"). */}}
{{- define "ragmon.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{ include "ragmon.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: ragmon
{{- end -}}

{{- define "ragmon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ragmon.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{- define "ragmon.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret holding the ingest token: the existing one named in auth.existingSecret, else the chart's own. */}}
{{- define "ragmon.authSecret" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecret }}{{- else -}}{{ include "ragmon.fullname" . }}-auth{{- end -}}
{{- end -}}

{{/* The Secret holding the read token: the existing one named in readAuth.existingSecret, else the chart's own; empty without a read token. */}}
{{- define "ragmon.readSecret" -}}
{{- if .Values.readAuth.existingSecret -}}{{ .Values.readAuth.existingSecret }}{{- else if .Values.readAuth.token -}}{{ include "ragmon.fullname" . }}-read{{- end -}}
{{- end -}}

{{/* The host names requests to the pods may carry (http.allowed_hosts): config.http.allowed_hosts and
each Service's DNS names, short and qualified (IP addresses, as probes and scrapes use, need no listing). */}}
{{- define "ragmon.allowedHosts" -}}
{{- $hosts := list -}}
{{- range (dig "http" "allowed_hosts" list .Values.config) }}{{ $hosts = append $hosts . }}{{ end -}}
{{- $namespace := .Release.Namespace -}}
{{- range $service := list (include "ragmon.fullname" .) (printf "%s-scheduler" (include "ragmon.fullname" .)) }}
{{- $hosts = concat $hosts (list $service (printf "%s.%s" $service $namespace) (printf "%s.%s.svc" $service $namespace)
      (printf "%s.%s.svc.%s" $service $namespace $.Values.clusterDomain)) }}
{{- end -}}
{{- toJson (uniq $hosts) -}}
{{- end -}}

{{/* The key of a token's next value (auth or readAuth given): nextSecretKey in an existing Secret, else "<secretKey>-next" in the chart's own when nextToken is set; empty when no next token is being rolled out. */}}
{{- define "ragmon.nextKey" -}}
{{- if .existingSecret -}}{{ .nextSecretKey }}{{- else if .nextToken -}}{{ .secretKey }}-next{{- end -}}
{{- end -}}

{{/* The Secret reference of the metrics token (secrets.RAGMON_HTTP__METRICS_TOKEN), for the ServiceMonitor; empty without one. */}}
{{- define "ragmon.metricsTokenRef" -}}
{{- with (get .Values.secrets "RAGMON_HTTP__METRICS_TOKEN") }}{{ toJson . }}{{ end -}}
{{- end -}}

{{/* "auto": when the cluster serves the CRD's API; otherwise the boolean given. */}}
{{- define "ragmon.wanted" -}}
{{- $setting := index . 0 -}}{{- $api := index . 1 -}}{{- $root := index . 2 -}}
{{- if eq (toString $setting) "auto" -}}
{{- if $root.Capabilities.APIVersions.Has $api -}}true{{- end -}}
{{- else if $setting -}}true{{- end -}}
{{- end -}}

{{/* The service account the pods run as. */}}
{{- define "ragmon.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ragmon.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Pod metadata beyond the labels: podLabels and podAnnotations, plus (dict "annotations" ...) of the caller. */}}
{{- define "ragmon.podMetadata" -}}
{{- $root := .root -}}
labels:
  {{- include "ragmon.labels" (dict "root" $root "component" .component) | nindent 2 }}
  {{- with $root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $annotations := merge (deepCopy (default dict .annotations)) (default dict $root.Values.podAnnotations) }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The environment every ragmon container gets; pass (dict "root" $ "env" dict "token" true "read" true). The
ingest token is left out of the migration hook: the chart's own token Secret does not exist yet then. The read
token ("read") goes to the collectors alone: they serve the reads. */}}
{{- define "ragmon.env" -}}
{{- $root := .root -}}
- name: PYTHONUNBUFFERED  # log lines reach the container log at once
  value: "1"
{{- range $name, $value := .env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- range $name, $value := $root.Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- if .token }}
- name: RAGMON_HTTP__TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "ragmon.authSecret" $root }}
      key: {{ $root.Values.auth.secretKey }}
{{- end }}
{{- with (and .token (include "ragmon.nextKey" $root.Values.auth)) }}
- name: RAGMON_HTTP__TOKEN_NEXT
  valueFrom:
    secretKeyRef:
      name: {{ include "ragmon.authSecret" $root }}
      key: {{ . }}
{{- end }}
{{- with (and .read (include "ragmon.readSecret" $root)) }}
- name: RAGMON_HTTP__READ_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $root.Values.readAuth.secretKey }}
{{- with (include "ragmon.nextKey" $root.Values.readAuth) }}
- name: RAGMON_HTTP__READ_TOKEN_NEXT
  valueFrom:
    secretKeyRef:
      name: {{ include "ragmon.readSecret" $root }}
      key: {{ . }}
{{- end }}
{{- end }}
{{- range $name, $ref := $root.Values.secrets }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Where a ragmon container's environment comes from in bulk: existingSecret (every key a RAGMON_ variable) and envFrom. */}}
{{- define "ragmon.envFrom" -}}
{{- $root := . -}}
{{- if or $root.Values.existingSecret $root.Values.envFrom }}
envFrom:
  {{- with $root.Values.existingSecret }}
  - secretRef: {name: {{ . }}}
  {{- end }}
  {{- with $root.Values.envFrom }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Pod-level settings every ragmon pod shares: identity, pull secrets, no service links, security
context; pass (dict "root" $ "hook" true) for a hook's pod, which names the service account only
when the release does not create it (a hook runs before the release's objects exist). */}}
{{- define "ragmon.podBasics" -}}
{{- $root := .root -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if not (and .hook $root.Values.serviceAccount.create) }}
serviceAccountName: {{ include "ragmon.serviceAccountName" $root }}
{{- end }}
automountServiceAccountToken: false
# Kubernetes would set RAGMON_SERVICE_HOST, RAGMON_PORT, ... for a Service named after the release;
# ragmon needs none of them (its config loader skips them anyway).
enableServiceLinks: false
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* Where a pod may run: the component's own nodeSelector, tolerations, affinity and
topologySpreadConstraints when set, else the chart-wide ones; pass (dict "root" $ "placement" .Values.collector). */}}
{{- define "ragmon.placement" -}}
{{- $root := .root -}}
{{- range $key := list "nodeSelector" "tolerations" "affinity" "topologySpreadConstraints" }}
{{- $value := (index $.placement $key) | default (index $root.Values $key) }}
{{- with $value }}
{{ $key }}:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The pod spec shared by the collector and the scheduler; pass (dict "root" $ "component" "collector" "args" (list "serve") "env" dict "resources" ... "placement" ... "data" volume "read" true), "read" for the pods that serve the read side. */}}
{{- define "ragmon.podSpec" -}}
{{- $root := .root -}}
{{ include "ragmon.podBasics" (dict "root" $root) | trim }}
containers:
  - name: {{ .component }}
    image: {{ include "ragmon.image" $root }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    command: ["ragmon", "--config", "/etc/ragmon/ragmon.yaml"]
    args: {{ toJson .args }}
    workingDir: /data
    ports:
      - name: http
        containerPort: {{ $root.Values.service.port }}
        protocol: TCP
      {{- if and .read $root.Values.service.readPort }}
      - name: read
        containerPort: {{ $root.Values.service.readPort }}
        protocol: TCP
      {{- end }}
    env:
      {{- include "ragmon.env" (dict "root" $root "env" .env "token" true "read" .read) | nindent 6 }}
    {{- with include "ragmon.envFrom" $root | trim }}{{ . | nindent 4 }}{{ end }}
    livenessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 10
      failureThreshold: 6
    readinessProbe:
      httpGet: {path: /readyz, port: http}
      periodSeconds: 5
      failureThreshold: 3
    startupProbe:
      # up to 120 s: the time ragmon waits for the database's schema (database.schema_wait_seconds, 90) and more
      httpGet: {path: /healthz, port: http}
      periodSeconds: 2
      failureThreshold: 60
    resources:
      {{- toYaml .resources | nindent 6 }}
    securityContext:
      {{- toYaml $root.Values.securityContext | nindent 6 }}
    volumeMounts:
      - {name: config, mountPath: /etc/ragmon, readOnly: true}
      - {name: data, mountPath: /data}
      - {name: tmp, mountPath: /tmp}
volumes:
  - name: config
    configMap:
      name: {{ include "ragmon.fullname" $root }}-config
  - name: data
    {{- toYaml .data | nindent 4 }}
  - name: tmp
    emptyDir: {}
{{- with include "ragmon.placement" (dict "root" $root "placement" .placement) | trim }}{{ . | nindent 0 }}{{ end }}
{{- end -}}
