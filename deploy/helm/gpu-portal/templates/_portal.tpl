{{/*
One portal process as a Deployment: the same image, environment and restricted security context;
what differs (command, identity, replicas, ports, probes) comes in the dict:
  root, component, replicas, command, resources, token (mount the ServiceAccount token), ports, probes,
  lifecycle, env (more variables, after the shared ones)
*/}}
{{- define "gp.portalDeployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "gp.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels: {{- include "gp.labels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  {{- if .recreate }}
  strategy: {type: Recreate}    # never two at once
  {{- end }}
  selector:
    matchLabels: {{- include "gp.selectorLabels" (dict "root" $root "component" .component) | nindent 6 }}
  template:
    metadata:
      labels: {{- include "gp.labels" (dict "root" $root "component" .component) | nindent 8 }}
      annotations:
        # A changed secret key restarts the pods that sign with it.
        checksum/config: {{ include "gp.env" $root | sha256sum | trunc 16 }}
    spec:
      serviceAccountName: {{ include "gp.sa" (dict "root" $root "name" .component) }}
      automountServiceAccountToken: {{ .token }}
      enableServiceLinks: false
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with (include "gp.scheduling" $root) }}{{ trim . | nindent 6 }}{{- end }}
      securityContext: {{- include "gp.podSecurity" dict | nindent 8 }}
      containers:
        - name: {{ .component }}
          image: {{ include "gp.image" (dict "root" $root "repository" $root.Values.image.repository "tag" $root.Values.image.tag) }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: {{- toYaml .command | nindent 12 }}
          env: {{- include "gp.env" $root | nindent 12 }}
            - {name: GPUPORTAL_ROLE, value: {{ .component }}}    # Postgres application_name
          {{- with .env }}
          {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .ports }}
          ports: {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .probes }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
          {{- with .lifecycle }}
          lifecycle: {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext: {{- include "gp.containerSecurity" dict | nindent 12 }}
          resources: {{- toYaml .resources | nindent 12 }}
          volumeMounts: {{- include "gp.tmpMount" dict | nindent 12 }}
      volumes: {{- include "gp.tmpVolume" dict | nindent 8 }}
{{- end -}}
