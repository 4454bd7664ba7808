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

{{/* "auto": when the cluster serves the CRD's API; otherwise the boolean given. */}}
{{- define "ragmon.wanted" -}}
{{- $setting := index . 0 -}}{{- $api := index . 1 -}}{{- $root := index . 2 -}}
{{- if eq (toString $setting) "auto" -}}
{{- if $root.Capabilities.APIVersions.Has $api -}}true{{- end -}}
{{- else if $setting -}}true{{- end -}}
{{- end -}}

{{/* The pod spec shared by the collector and the scheduler; pass (dict "root" $ "component" "collector" "args" (list "serve") "env" dict "resources" ... "placement" ...). */}}
{{- define "ragmon.podSpec" -}}
{{- $root := .root -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
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
    env:
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
      - name: RAGMON_HTTP__TOKEN
        valueFrom:
          secretKeyRef:
            name: {{ include "ragmon.authSecret" $root }}
            key: {{ $root.Values.auth.secretKey }}
      {{- range $name, $ref := $root.Values.secrets }}
      - name: {{ $name }}
        valueFrom:
          secretKeyRef:
            name: {{ $ref.name }}
            key: {{ $ref.key }}
      {{- end }}
    livenessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 10
      failureThreshold: 6
    readinessProbe:
      httpGet: {path: /readyz, port: http}
      periodSeconds: 5
      failureThreshold: 3
    startupProbe:
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
    emptyDir: {}
  - name: tmp
    emptyDir: {}
{{- with .placement.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .placement.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .placement.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
