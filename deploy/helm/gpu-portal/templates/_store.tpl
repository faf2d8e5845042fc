{{/*
A bundled data store (Postgres or Redis) as a one-replica StatefulSet with a PVC and a Service.
dict: root, component, image, port, uid, env, command, dataPath, values (persistence, resources), probe
*/}}
{{- define "gp.store" -}}
{{- $root := .root -}}
{{- $name := printf "%s-%s" (include "gp.fullname" $root) .component -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels: {{- include "gp.labels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  selector: {{- include "gp.selectorLabels" (dict "root" $root "component" .component) | nindent 4 }}
  ports:
    - {name: {{ .component }}, port: {{ .port }}, targetPort: {{ .port }}, protocol: TCP}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels: {{- include "gp.labels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  serviceName: {{ $name }}
  replicas: 1
  selector:
    matchLabels: {{- include "gp.selectorLabels" (dict "root" $root "component" .component) | nindent 6 }}
  template:
    metadata:
      labels: {{- include "gp.labels" (dict "root" $root "component" .component) | nindent 8 }}
    spec:
      automountServiceAccountToken: false
      enableServiceLinks: false
      {{- with (include "gp.scheduling" $root) }}{{ trim . | nindent 6 }}{{- end }}
      securityContext: {{- include "gp.podSecurity" (dict "uid" .uid) | nindent 8 }}
      containers:
        - name: {{ .component }}
          image: {{ .image }}
          {{- with .command }}
          command: {{- toYaml . | nindent 12 }}
          {{- end }}
          env: {{- toYaml .env | nindent 12 }}
          ports:
            - {name: {{ .component }}, containerPort: {{ .port }}, protocol: TCP}
          readinessProbe:
            exec: {command: {{ toJson .probe }}}
            periodSeconds: 5
            timeoutSeconds: 3
          livenessProbe:
            exec: {command: {{ toJson .probe }}}
            periodSeconds: 15
            timeoutSeconds: 5
            failureThreshold: 4
          securityContext: {{- include "gp.containerSecurity" dict | nindent 12 }}
          resources: {{- toYaml .values.resources | nindent 12 }}
          volumeMounts:
            - {name: data, mountPath: {{ .dataPath }}}
            - {name: run, mountPath: /var/run/{{ .component }}}
            {{- include "gp.tmpMount" dict | nindent 12 }}
      volumes:
        - name: run
          emptyDir: {}
        {{- include "gp.tmpVolume" dict | nindent 8 }}
        {{- if not .values.persistence.enabled }}
        - name: data
          emptyDir: {}
        {{- end }}
  {{- if .values.persistence.enabled }}
  # Kept on uninstall: Kubernetes leaves a StatefulSet's claims (README, "Uninstall").
  volumeClaimTemplates:
    - metadata:
        name: data
        labels: {{- include "gp.selectorLabels" (dict "root" $root "component" .component) | nindent 10 }}
      spec:
        accessModes: [ReadWriteOnce]
        {{- with .values.persistence.storageClass }}
        storageClassName: {{ . }}
        {{- end }}
        resources:
          requests: {storage: {{ .values.persistence.size }}}
  {{- end }}
{{- end -}}
