{{/* Names and labels. */}}
{{- define "ndbgate-sidecar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ndbgate-sidecar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ndbgate-sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ndbgate-sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ndbgate-sidecar.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ndbgate-sidecar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The port of a host:port listener. */}}
{{- define "ndbgate-sidecar.port" -}}
{{- splitList ":" . | last -}}
{{- end -}}

{{/* The host of a host:port listener. */}}
{{- define "ndbgate-sidecar.host" -}}
{{- splitList ":" . | initial | join ":" -}}
{{- end -}}

{{/* The memory limit ndbgate's rows are charged (MiB): the embedded engine's,
     or the local cache's in front of NDB; 0 for NDB alone. */}}
{{- define "ndbgate-sidecar.memoryLimitMiB" -}}
{{- $g := .Values.ndbgate -}}
{{- if eq $g.mode "embedded" -}}
{{- int $g.embedded.memoryLimitMiB -}}
{{- else if $g.ndb.cache.enabled -}}
{{- int $g.ndb.cache.memoryLimitMiB -}}
{{- else -}}
0
{{- end -}}
{{- end -}}

{{/* The container's memory (MiB) for a memory limit M: arena pages, slot
     arrays and indexes together stay within 1.5 M plus 68 KiB per partition
     and table and 1 MiB while a compaction runs (docs/CONFIGURATION.md,
     embedded.memory_limit); values still arriving take up to min(M/4, 64
     MiB); the process itself about 30 MiB, which leaves the last 64 MiB room
     for those 68 KiBs (1.1 MiB per 16-partition table). NDB alone: 256 MiB. */}}
{{- define "ndbgate-sidecar.containerMemoryMiB" -}}
{{- $m := int (include "ndbgate-sidecar.memoryLimitMiB" .) -}}
{{- if eq $m 0 -}}
256
{{- else -}}
{{- add (div (mul $m 3) 2) (min (div $m 4) 64) 64 -}}
{{- end -}}
{{- end -}}

{{- define "ndbgate-sidecar.image" -}}
{{- $i := .Values.ndbgate.image -}}
{{- $repo := ternary $i.repository $i.ndbRepository (eq .Values.ndbgate.mode "embedded") -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion $i.tag) -}}
{{- end -}}

{{/* ndbgate's configuration file: ndbgate.config, plus the caching key
     prefix in ndb mode with a cache. Empty when there is nothing to say. */}}
{{- define "ndbgate-sidecar.configFile" -}}
{{- $g := .Values.ndbgate -}}
{{- $cfg := deepCopy $g.config -}}
{{- if and (eq $g.mode "ndb") $g.ndb.cache.enabled (not (hasKey $cfg "key_prefixes")) -}}
{{- $_ := set $cfg "key_prefixes" (list (dict "prefix" "" "container" "default" "policy" "caching")) -}}
{{- end -}}
{{- if $cfg -}}
{{- toYaml $cfg -}}
{{- end -}}
{{- end -}}

{{/* Checks that no schema can express. */}}
{{- define "ndbgate-sidecar.validate" -}}
{{- $g := .Values.ndbgate -}}
{{- if not (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "ndbgate-sidecar needs Kubernetes 1.30 or later (native sidecars, preStop sleep), and is rendered for %s. helm install and upgrade take the cluster's version; helm template and helm lint assume v1.20.0 unless told: add --kube-version (your cluster's, e.g. --kube-version 1.33)" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- if and (eq $g.mode "ndb") (not $g.ndb.connectstring) -}}
{{- fail "ndbgate.mode=ndb needs ndbgate.ndb.connectstring (the management servers, host:1186[,host:1186])" -}}
{{- end -}}
{{- if and (eq $g.mode "embedded") $g.ndb.connectstring -}}
{{- fail "ndbgate.ndb.connectstring is set but ndbgate.mode is embedded: set ndbgate.mode=ndb (the NDB image) or drop the connectstring" -}}
{{- end -}}
{{- if and $g.tls.mutual (not $g.tls.secretName) -}}
{{- fail "ndbgate.tls.mutual needs ndbgate.tls.secretName (a Secret with tls.crt, tls.key and ca.crt)" -}}
{{- end -}}
{{- if and $g.memcache.tls (not $g.tls.secretName) -}}
{{- fail "ndbgate.memcache.tls needs ndbgate.tls.secretName" -}}
{{- end -}}
{{- if not $g.rest -}}
{{- fail "ndbgate.rest must be set: the probes and /metrics are served there" -}}
{{- end -}}
{{- end -}}

{{/* HTTP probes on the REST port; with mutual TLS the kubelet has no client
     certificate, so the probes only check that the port accepts. */}}
{{- define "ndbgate-sidecar.probe" -}}
{{- $g := .root.Values.ndbgate -}}
{{- if $g.tls.mutual }}
tcpSocket:
  port: http
{{- else }}
httpGet:
  path: {{ .probe.path }}
  port: http
  scheme: {{ ternary "HTTPS" "HTTP" (not (empty $g.tls.secretName)) }}
{{- end }}
periodSeconds: {{ .probe.periodSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
timeoutSeconds: 2
{{- end -}}

{{/* The ndbgate container. */}}
{{- define "ndbgate-sidecar.container" -}}
{{- $g := .Values.ndbgate -}}
{{- $mem := include "ndbgate-sidecar.memoryLimitMiB" . | int -}}
- name: ndbgate
  image: {{ include "ndbgate-sidecar.image" . | quote }}
  imagePullPolicy: {{ $g.image.pullPolicy }}
  {{- if $g.nativeSidecar }}
  restartPolicy: Always
  {{- end }}
  args:
    - serve
    - --memcache-socket-mode=0770
    {{- if $g.tls.secretName }}
    - --api-tls
    - --tls-cert=/etc/ndbgate/tls/tls.crt
    - --tls-key=/etc/ndbgate/tls/tls.key
    {{- if $g.tls.mutual }}
    - --tls-client-ca=/etc/ndbgate/tls/ca.crt
    {{- end }}
    {{- if $g.memcache.tls }}
    - --memcache-tls={{ $g.memcache.tls }}
    {{- end }}
    {{- end }}
    {{- range $g.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: NDBGATE_MEMCACHE
      value: {{ $g.memcache.tcp | quote }}
    - name: NDBGATE_MEMCACHE_SOCKET
      value: {{ printf "%s/%s" $g.memcache.socketDir $g.memcache.socketName | quote }}
    - name: NDBGATE_REST
      value: {{ $g.rest | quote }}
    - name: NDBGATE_GRPC
      value: {{ $g.grpc | quote }}
    - name: NDBGATE_LOG_LEVEL
      value: {{ $g.logLevel | quote }}
    - name: NDBGATE_LOG_FORMAT
      value: json
    {{- if gt $mem 0 }}
    - name: NDBGATE_MEMORY_LIMIT
      value: {{ printf "%dm" $mem | quote }}
    {{- end }}
    {{- if eq $g.mode "embedded" }}
    - name: NDBGATE_PARTITIONS
      value: {{ $g.embedded.partitions | quote }}
    {{- else }}
    - name: NDBGATE_NDB_CONNECTSTRING
      value: {{ $g.ndb.connectstring | quote }}
    - name: NDBGATE_NDB_POOL_SIZE
      value: {{ $g.ndb.poolSize | quote }}
    {{- end }}
    {{- if $g.apiKeys.secretName }}
    - name: NDBGATE_API_KEYS
      value: {{ printf "/etc/ndbgate/api-keys/%s" $g.apiKeys.secretKey | quote }}
    {{- end }}
    {{- if include "ndbgate-sidecar.configFile" . }}
    - name: NDBGATE_CONFIG
      value: /etc/ndbgate/config/ndbgate.yaml
    {{- end }}
    {{- with $g.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: http
      containerPort: {{ include "ndbgate-sidecar.port" $g.rest }}
      protocol: TCP
    {{- if and $g.grpc (ne (include "ndbgate-sidecar.host" $g.grpc) "127.0.0.1") }}
    - name: grpc
      containerPort: {{ include "ndbgate-sidecar.port" $g.grpc }}
      protocol: TCP
    {{- end }}
    {{- if and $g.memcache.tcp (ne (include "ndbgate-sidecar.host" $g.memcache.tcp) "127.0.0.1") }}
    - name: memcache
      containerPort: {{ include "ndbgate-sidecar.port" $g.memcache.tcp }}
      protocol: TCP
    {{- end }}
    {{- if $g.memcache.tls }}
    - name: memcache-tls
      containerPort: {{ include "ndbgate-sidecar.port" $g.memcache.tls }}
      protocol: TCP
    {{- end }}
  startupProbe:
    {{- include "ndbgate-sidecar.probe" (dict "root" . "probe" $g.probes.startup) | trim | nindent 4 }}
  readinessProbe:
    {{- include "ndbgate-sidecar.probe" (dict "root" . "probe" $g.probes.readiness) | trim | nindent 4 }}
  livenessProbe:
    {{- include "ndbgate-sidecar.probe" (dict "root" . "probe" $g.probes.liveness) | trim | nindent 4 }}
  {{- if not $g.nativeSidecar }}
  lifecycle:
    preStop:
      sleep:
        seconds: 5
  {{- end }}
  resources:
    {{- if $g.resources }}
    {{- toYaml $g.resources | nindent 4 }}
    {{- else }}
    {{- $m := include "ndbgate-sidecar.containerMemoryMiB" . }}
    requests:
      cpu: 100m
      memory: {{ printf "%sMi" $m }}
    limits:
      cpu: "1"
      memory: {{ printf "%sMi" $m }}
    {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: {{ $g.uid }}
    runAsGroup: {{ $g.gid }}
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
  volumeMounts:
    - name: ndbgate-socket
      mountPath: {{ $g.memcache.socketDir }}
    {{- if include "ndbgate-sidecar.configFile" . }}
    - name: ndbgate-config
      mountPath: /etc/ndbgate/config
      readOnly: true
    {{- end }}
    {{- if $g.apiKeys.secretName }}
    - name: ndbgate-api-keys
      mountPath: /etc/ndbgate/api-keys
      readOnly: true
    {{- end }}
    {{- if $g.tls.secretName }}
    - name: ndbgate-tls
      mountPath: /etc/ndbgate/tls
      readOnly: true
    {{- end }}
{{- end -}}
