{{/* Names. */}}
{{- define "kelp.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kelp.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "kelp.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* Selector labels of one component: call with (list . "master"). */}}
{{- define "kelp.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "kelp.masterService" -}}{{ include "kelp.fullname" . }}-master{{- end -}}
{{- define "kelp.volumeService" -}}{{ include "kelp.fullname" . }}-volume{{- end -}}
{{- define "kelp.filerService" -}}{{ include "kelp.fullname" . }}-filer{{- end -}}

{{/* DNS suffix of the pods behind a headless service: call with (list . "svc"). */}}
{{- define "kelp.podDomain" -}}
{{- $ := index . 0 -}}
{{ index . 1 }}.{{ $.Release.Namespace }}.svc.{{ $.Values.clusterDomain }}
{{- end -}}

{{/* The masters' HTTP addresses, host:port,..., the same on every master (--peers) and for every client (--master). */}}
{{- define "kelp.masterPeers" -}}
{{- $svc := include "kelp.masterService" . -}}
{{- $domain := include "kelp.podDomain" (list . $svc) -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.master.replicas) -}}
{{- $peers = append $peers (printf "%s-%d.%s:%d" $svc $i $domain (int $.Values.master.port)) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{/* The filer's client address host:port (its gRPC port is +10000). */}}
{{- define "kelp.filerAddress" -}}
{{ include "kelp.filerService" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ .Values.filer.port }}
{{- end -}}

{{/* Common env: the pod's own name and namespace, for $(POD_NAME) in args. */}}
{{- define "kelp.podEnv" -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
{{- end -}}

{{/* Args shared by every Kelp process: metrics, then the global extras.
     Like the two port helpers below: no leading newline, nothing when empty;
     callers wrap it in a "with" and nindent it. */}}
{{- define "kelp.commonArgs" -}}
{{- $a := list -}}
{{- if .Values.metrics.enabled -}}{{- $a = append $a (printf "--metrics.port=%v" .Values.metrics.port) -}}{{- end -}}
{{- if .Values.tls.secret -}}{{- $a = concat $a (list "--tls.cert=/etc/kelp/tls/tls.crt" "--tls.key=/etc/kelp/tls/tls.key" "--tls.ca=/etc/kelp/tls/ca.crt") -}}{{- end -}}
{{- range .Values.extraArgs -}}{{- $a = append $a . -}}{{- end -}}
{{- range $i, $v := $a -}}{{- if $i }}{{ "\n" }}{{ end }}- {{ $v | quote }}{{- end -}}
{{- end -}}

{{/* Probes on /healthz of a named port: call with (dict "port" "http" "scheme" (include "kelp.scheme" .)). */}}
{{- define "kelp.probes" -}}
readinessProbe:
  httpGet: {path: /healthz, port: {{ .port }}, scheme: {{ .scheme }}}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}, scheme: {{ .scheme }}}
  initialDelaySeconds: 20
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end -}}

{{- define "kelp.metricsPort" -}}
{{- if .Values.metrics.enabled -}}
- {name: metrics, containerPort: {{ .Values.metrics.port }}}
{{- end -}}
{{- end -}}

{{- define "kelp.metricsServicePort" -}}
{{- if .Values.metrics.enabled -}}
- {name: metrics, port: {{ .Values.metrics.port }}, targetPort: metrics}
{{- end -}}
{{- end -}}

{{/* CSI: the node plugin's socket directory on the host, and the socket path the kubelet dials. */}}
{{- define "kelp.csiPluginDir" -}}
{{ .Values.csi.kubeletDir }}/plugins/{{ .Values.csi.driverName }}
{{- end -}}
{{- define "kelp.csiSocketDir" -}}/csi{{- end -}}
{{- define "kelp.csiEndpoint" -}}unix://{{ include "kelp.csiSocketDir" . }}/csi.sock{{- end -}}

{{/* The livenessprobe sidecar: serves /healthz by calling the driver's Probe over the socket. */}}
{{- define "kelp.csiLivenessSidecar" -}}
- name: liveness-probe
  image: {{ .Values.csi.sidecars.livenessProbe.image }}
  imagePullPolicy: {{ .Values.csi.sidecars.pullPolicy }}
  args:
    - --csi-address={{ include "kelp.csiSocketDir" . }}/csi.sock
    - --health-port={{ .Values.csi.sidecars.livenessProbe.port }}
  volumeMounts:
    - {name: socket-dir, mountPath: {{ include "kelp.csiSocketDir" . }}}
  resources:
    requests: {cpu: 10m, memory: 20Mi}
{{- end -}}

{{/* Liveness of the kelp csi container: /healthz of the livenessprobe sidecar. */}}
{{- define "kelp.csiLiveness" -}}
livenessProbe:
  httpGet: {path: /healthz, port: healthz}
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 5
{{- end -}}

{{/* TLS (tls.secret): the flags, the mount and the volume of every Kelp container; no leading newline, nothing without TLS. */}}
{{- define "kelp.tlsMount" -}}
{{- if .Values.tls.secret -}}
- {name: kelp-tls, mountPath: /etc/kelp/tls, readOnly: true}
{{- end -}}
{{- end -}}
{{- define "kelp.tlsVolume" -}}
{{- if .Values.tls.secret -}}
- name: kelp-tls
  secret: {secretName: {{ .Values.tls.secret }}}
{{- end -}}
{{- end -}}
{{- define "kelp.scheme" -}}{{ ternary "HTTPS" "HTTP" (not (empty .Values.tls.secret)) }}{{- end -}}
