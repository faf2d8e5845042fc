{{/* Names, labels and the environment every portal process shares. */}}

{{- define "gp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "gp.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "gp.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gp.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gp.labels" -}}
{{ include "gp.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: gpu-portal
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "gp.image" -}}
{{- printf "%s:%s" .repository (.tag | default .root.Chart.AppVersion) -}}
{{- end -}}

{{- define "gp.nodeNamespace" -}}
{{- .Values.node.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* ServiceAccount names: one identity per process kind (README, "Identities"). */}}
{{- define "gp.sa" -}}
{{- printf "%s-%s" (include "gp.fullname" .root) .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gp.saUser" -}}
{{- printf "system:serviceaccount:%s:%s" .ns (include "gp.sa" (dict "root" .root "name" .name)) -}}
{{- end -}}

{{- define "gp.tenantRole" -}}{{ include "gp.fullname" . }}-tenant{{- end -}}
{{- define "gp.tenantReadRole" -}}{{ include "gp.fullname" . }}-tenant-read{{- end -}}

{{/* Who the provisioner binds in each tenant namespace, as the portal reads it (JSON). */}}
{{- define "gp.tenantBindings" -}}
{{- $ns := .Release.Namespace -}}
{{- /* The controller only watches and holds its Lease: the worker alone writes Jobs. */ -}}
{{- $write := list (printf "%s:%s" $ns (include "gp.sa" (dict "root" . "name" "worker"))) -}}
{{- $read := list (printf "%s:%s" $ns (include "gp.sa" (dict "root" . "name" "web"))) -}}
{{- dict (include "gp.tenantRole" .) $write (include "gp.tenantReadRole" .) $read | toJson -}}
{{- end -}}

{{- define "gp.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}{{ .Values.database.existingSecret }}{{- else -}}{{ include "gp.fullname" . }}-database{{- end -}}
{{- end -}}

{{- define "gp.secretKeySecret" -}}
{{- .Values.secretKey.existingSecret | default (printf "%s-secret-key" (include "gp.fullname" .)) -}}
{{- end -}}

{{/* A generated secret value that survives upgrades: the live Secret's value when there is one. */}}
{{- define "gp.keptValue" -}}
{{- $live := lookup "v1" "Secret" .root.Release.Namespace .secret -}}
{{- if and $live (index ($live.data | default dict) .key) -}}
{{- index $live.data .key | b64dec -}}
{{- else -}}
{{- randAlphaNum .length -}}
{{- end -}}
{{- end -}}

{{/* The web Service's name inside the cluster, as the portal's own clients (the node agents) call it. */}}
{{- define "gp.webServiceHost" -}}
{{ include "gp.fullname" . }}-web.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* Where the portal's own pods run (the root values); nothing when none is set. */}}
{{- define "gp.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gp.podSecurity" -}}
runAsNonRoot: true
runAsUser: {{ .uid | default 10001 }}
runAsGroup: {{ .uid | default 10001 }}
fsGroup: {{ .uid | default 10001 }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "gp.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "gp.env" -}}
- name: GPUPORTAL_PRODUCTION
  value: "1"
- name: SECRET_KEY
  valueFrom:
    secretKeyRef: {name: {{ include "gp.secretKeySecret" . }}, key: {{ .Values.secretKey.existingSecretKey | default "secret-key" }}}
{{- if .Values.monitoring.serviceMonitor.enabled }}
{{- /* /metrics answers the ServiceMonitor's bearer token (templates/monitoring.yaml). */}}
- name: GPU_METRICS_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ include "gp.fullname" . }}-metrics-token, key: token}
{{- end }}
{{- if .Values.database.bundled }}
- name: POSTGRES_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "gp.fullname" . }}-postgresql, key: password}
- name: DATABASE_URL
  value: {{ printf "postgres://%s:$(POSTGRES_PASSWORD)@%s-postgresql:5432/%s" .Values.postgresql.user (include "gp.fullname" .) .Values.postgresql.database | quote }}
{{- else }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ include "gp.databaseSecret" . }}, key: {{ .Values.database.existingSecretKey | default "url" }}}
{{- end }}
{{- if .Values.redis.bundled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "gp.fullname" . }}-redis, key: password}
- name: REDIS_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s-redis:6379/0" (include "gp.fullname" .) | quote }}
{{- else }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.redis.existingSecret | default (printf "%s-redis-external" (include "gp.fullname" .)) }}, key: {{ .Values.redis.existingSecretKey | default "url" }}}
{{- end }}
{{- /* The web Service's own name too: the node agents send their samples there. */}}
- name: ALLOWED_HOSTS
  value: {{ join "," (append .Values.portal.allowedHosts (include "gp.webServiceHost" .)) | quote }}
- name: CSRF_TRUSTED_ORIGINS
  value: {{ join "," .Values.portal.csrfTrustedOrigins | quote }}
{{- /* Behind the chart's Ingress every request comes from the ingress controller: at least that one
proxy counts, or every client would share its address in the rate limits. */}}
- name: GPUPORTAL_TRUSTED_PROXIES
  value: {{ ternary (max 1 (int .Values.portal.trustedProxies)) (int .Values.portal.trustedProxies) .Values.ingress.enabled | quote }}
- name: TRUST_X_FORWARDED_PROTO
  value: {{ ternary "1" "0" .Values.portal.behindTlsProxy | quote }}
- name: GPUPORTAL_NAMESPACE_PREFIX
  value: {{ .Values.portal.namespacePrefix | quote }}
- name: GPUPORTAL_PROJECT_UID_BASE
  value: {{ .Values.portal.projectUidBase | int | quote }}
- name: GPUPORTAL_LEASE_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: GPU_PLUGIN_CONFIG_NAMESPACE
  value: {{ include "gp.nodeNamespace" . | quote }}
- name: GPUPORTAL_TENANT_ROLE_BINDINGS
  value: {{ include "gp.tenantBindings" . | quote }}
- name: GPUPORTAL_PROVISIONER_QUEUE
  value: provision
- name: GPUPORTAL_AGENT_SERVICE_ACCOUNTS
  value: {{ printf "%s:%s" (include "gp.nodeNamespace" .) (include "gp.sa" (dict "root" . "name" "node")) | quote }}
- name: GPUPORTAL_AGENT_TOKEN_AUDIENCE
  value: {{ .Values.node.tokenAudience | quote }}
- name: GPUPORTAL_VAR_DIR
  value: /tmp/gpu-portal
{{- with .Values.portal.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The writable places of a read-only root filesystem. */}}
{{- define "gp.tmpVolume" -}}
- name: tmp
  emptyDir: {sizeLimit: 256Mi}
{{- end -}}
{{- define "gp.tmpMount" -}}
- {name: tmp, mountPath: /tmp}
{{- end -}}
