{{/* Names. Every object carries the trench, so two releases of different
trenches can share a namespace. */}}
{{- define "causeway.trench" -}}{{ .Values.trench.name }}{{- end -}}
{{- define "causeway.ipamName" -}}ipam-{{ include "causeway.trench" . }}{{- end -}}
{{- define "causeway.ipamService" -}}ipam-service-{{ include "causeway.trench" . }}{{- end -}}
{{- /* The headless Service that gives each IPAM replica its DNS name. */ -}}
{{- define "causeway.ipamPeers" -}}ipam-peers-{{ include "causeway.trench" . }}{{- end -}}
{{- define "causeway.ipamLease" -}}causeway-ipam-{{ include "causeway.trench" . }}{{- end -}}
{{- /* The IPAM's store: ipam.store, or when empty bolt for one replica and
kubernetes for more; bolt with more than one replica fails the render. */ -}}
{{- define "causeway.ipamStore" -}}
{{- $store := .Values.ipam.store | default (ternary "bolt" "kubernetes" (eq (int .Values.ipam.replicas) 1)) -}}
{{- if and (eq $store "bolt") (gt (int .Values.ipam.replicas) 1) -}}
{{- fail (printf "ipam.replicas is %d with ipam.store bolt: a bbolt file has one writer; set ipam.store: kubernetes (or leave it empty) for replicas" (int .Values.ipam.replicas)) -}}
{{- end -}}
{{- $store -}}
{{- end -}}
{{- define "causeway.nspName" -}}nsp-{{ include "causeway.trench" . }}{{- end -}}
{{/* The proxy builds the NSP address as <NSM_NSP_SERVICE_NAME>-<trench>.<namespace>:<port>. */}}
{{- define "causeway.nspServicePrefix" -}}nsp-service{{- end -}}
{{- define "causeway.nspService" -}}{{ include "causeway.nspServicePrefix" . }}-{{ include "causeway.trench" . }}{{- end -}}
{{- define "causeway.proxyServiceAccount" -}}proxy-{{ include "causeway.trench" . }}{{- end -}}

{{/* Ports: the binaries' defaults (IPAM_PORT, NSP_PORT, NSM_METRICS_ADDRESS). */}}
{{- define "causeway.ipamPort" -}}7777{{- end -}}
{{- define "causeway.nspPort" -}}7778{{- end -}}
{{/* IPAM_HEALTH_PORT and NSP_HEALTH_PORT: plain-text health for the kubelet. */}}
{{- define "causeway.healthPort" -}}7779{{- end -}}

{{/* Where the images put the binaries, and the user they run as. */}}
{{- define "causeway.binary" -}}/usr/local/bin/{{ . }}{{- end -}}
{{- define "causeway.user" -}}10005{{- end -}}

{{- define "causeway.image" -}}
{{- $img := index .root.Values.images .name -}}
{{- $ref := printf "%s:%s" $img.repository (default .root.Chart.AppVersion $img.tag) }}
{{- with $img.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end }}
image: {{ $ref | quote }}
imagePullPolicy: {{ $img.pullPolicy }}
{{- end -}}

{{- define "causeway.labels" -}}
app.kubernetes.io/name: causeway
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
causeway.io/trench: {{ .root.Values.trench.name }}
{{- end -}}

{{- define "causeway.selector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
causeway.io/trench: {{ .root.Values.trench.name }}
{{- end -}}

{{/* The SPIFFE socket, as go-spiffe reads it. */}}
{{- define "causeway.spiffeEnv" -}}
- name: SPIFFE_ENDPOINT_SOCKET
  value: {{ printf "unix://%s/%s" .Values.spire.socketDir .Values.spire.socket | quote }}
{{- end -}}

{{- define "causeway.spireMount" -}}
- name: spire-agent-socket
  mountPath: {{ .Values.spire.socketDir }}
  readOnly: true
{{- end -}}

{{- define "causeway.spireVolume" -}}
- name: spire-agent-socket
{{- if eq .Values.spire.workloadAPI "csi" }}
  csi:
    driver: {{ .Values.spire.csiDriver }}
    readOnly: true
{{- else }}
  hostPath:
    path: {{ .Values.spire.socketDir }}
    type: Directory
{{- end }}
{{- end -}}

{{/* The container security context of ipam and nsp: nothing but their
binary, no capability at all. */}}
{{- define "causeway.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: {{ include "causeway.user" . }}
runAsGroup: {{ include "causeway.user" . }}
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The sysctls the proxy checks in its namespace for the IP family it
serves (dataplane.PodSysctls, listed by family in
deployments/config-reference.json; the chart's test compares). */}}
{{- define "causeway.proxySysctls" -}}
{{- $v4 := list "net.ipv4.ip_forward=1" "net.ipv4.conf.all.forwarding=1" "net.ipv4.fib_multipath_hash_policy=1" "net.ipv4.conf.all.rp_filter=0" "net.ipv4.conf.default.rp_filter=0" "net.ipv4.conf.default.promote_secondaries=1" "net.ipv4.conf.default.arp_notify=1" -}}
{{- $v6 := list "net.ipv6.conf.all.forwarding=1" "net.ipv6.fib_multipath_hash_policy=1" "net.ipv6.conf.all.accept_dad=0" "net.ipv6.conf.default.accept_dad=0" "net.ipv6.conf.default.ndisc_notify=1" -}}
{{- $out := list -}}
{{- if ne .Values.ipFamily "ipv6" }}{{ $out = concat $out $v4 }}{{ end -}}
{{- if ne .Values.ipFamily "ipv4" }}{{ $out = concat $out $v6 }}{{ end -}}
{{- join "\n" $out -}}
{{- end -}}

{{/* The generated name of a controller's pods (dict name): the
controller's name and a dash, then five random characters (the schema's
limits on names keep it under the 58 characters where Kubernetes would
cut the first part). */}}
{{- define "causeway.generatedPodPattern" -}}
{{ .name }}-[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]
{{- end -}}

{{/* Whether the proxies get per-node IDs and the IPAM holds them to their
node (spire.nodeIDs, never in insecure mode: nothing to prove with). */}}
{{- define "causeway.nodeIDs" -}}
{{- if and .Values.spire.nodeIDs (not .Values.insecure) }}true{{ end -}}
{{- end -}}

{{/* The rules (pkg/spiffeauthz) that match the pods of a component (dict
root, component: proxy or ipam) under spire.idScheme, comma-separated:
exact service-account IDs and the pod names of its controllers, in this
release's namespace; in the trust domain spire.trustDomain, or the
server's own when it is empty. */}}
{{- define "causeway.spiffeRules" -}}
{{- $root := .root -}}
{{- $scheme := $root.Values.spire.idScheme -}}
{{- $td := "" -}}
{{- with $root.Values.spire.trustDomain }}{{ $td = printf "spiffe://%s" . }}{{ end -}}
{{- $base := printf "%s/ns/%s" $td $root.Release.Namespace -}}
{{- $trench := include "causeway.trench" $root -}}
{{- $rules := list -}}
{{- if ne $scheme "pod" -}}
{{- $rules = append $rules (printf "%s/sa/%s-%s" $base .component $trench) -}}
{{- end -}}
{{- if and (include "causeway.nodeIDs" $root) (eq .component "proxy") -}}
{{- $rules = append $rules (printf "%s/sa/%s/node/*" $base (include "causeway.proxyServiceAccount" $root)) -}}
{{- end -}}
{{- if ne $scheme "serviceAccount" -}}
{{- if eq .component "proxy" -}}
{{- range $root.Values.conduits -}}
{{- $rules = append $rules (printf "%s/pod/%s" $base (include "causeway.generatedPodPattern" (dict "name" (printf "proxy-%s-%s" $trench .name)))) -}}
{{- end -}}
{{- else if eq .component "nsp" -}}
{{- $rules = append $rules (printf "%s/pod/%s-[a-z0-9]*-[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]" $base (include "causeway.nspName" $root)) -}}
{{- else -}}
{{- $rules = append $rules (printf "%s/pod/%s-[0-9]" $base (include "causeway.ipamName" $root)) -}}
{{- end -}}
{{- end -}}
{{- join "," $rules -}}
{{- end -}}

{{/* The rules of the targets that may connect to a conduit's proxies (dict
root, conduit), comma-separated: the conduit's targetIDs when it sets them
(an empty list: "", any client NSM lets through); unset, the pods of this
release's namespace in both ID forms (targets are not the chart's pods, and
a cluster may name them in the other form than spire.idScheme: NSM's
nsm-workloads names labelled pods by pod), in the trust domain
spire.trustDomain, or the proxy's own when it is empty. The proxies'
per-node IDs have more segments and match neither. */}}
{{- define "causeway.targetIDs" -}}
{{- if kindIs "slice" .conduit.targetIDs -}}
{{- join "," .conduit.targetIDs -}}
{{- else -}}
{{- $td := "" -}}
{{- with .root.Values.spire.trustDomain }}{{ $td = printf "spiffe://%s" . }}{{ end -}}
{{- $base := printf "%s/ns/%s" $td .root.Release.Namespace -}}
{{- printf "%s/pod/*,%s/sa/*" $base $base -}}
{{- end -}}
{{- end -}}

{{/* The security settings of a binary: plain gRPC when asked for, SPIFFE
otherwise, with the callers it authorizes (prefix: IPAM or NSP; callers:
the components allowed to call it) and the IDs of the servers it dials
(servers: variable suffix → component), derived the same way. */}}
{{- define "causeway.securityEnv" -}}
{{- if .root.Values.insecure }}
- name: {{ .prefix }}_INSECURE
  value: "true"
{{- else }}
{{- $rules := list }}
{{- range .callers }}
{{- $rules = append $rules (include "causeway.spiffeRules" (dict "root" $.root "component" .)) }}
{{- end }}
{{- if $rules }}
- name: {{ .prefix }}_AUTHORIZED_IDS
  value: {{ join "," $rules | quote }}
{{- end }}
{{- range $env, $server := .servers }}
- name: {{ $.prefix }}_{{ $env }}
  value: {{ include "causeway.spiffeRules" (dict "root" $.root "component" $server) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Whether the proxies of a conduit (dict root, conduit) run the service
load balancer: services.enabled, and the kubernetes source or a
servicesFile for the conduit. */}}
{{- define "causeway.servicesOn" -}}
{{- if and .root.Values.services.enabled (or (include "causeway.servicesFromAPI" .root) (hasKey .conduit "servicesFile")) }}true{{ end -}}
{{- end -}}

{{/* Whether the services come from the API server (services.enabled and
source kubernetes). */}}
{{- define "causeway.servicesFromAPI" -}}
{{- if and .Values.services.enabled (eq .Values.services.source "kubernetes") }}true{{ end -}}
{{- end -}}

{{- define "causeway.servicesConfigMap" -}}
proxy-{{ include "causeway.trench" .root }}-{{ .conduit.name }}-services
{{- end -}}

{{/* Where the proxy reads its services file: a ConfigMap volume mounted as
a directory (not with subPath, whose file the kubelet never updates). */}}
{{- define "causeway.servicesDir" -}}/etc/causeway/services{{- end -}}
{{- define "causeway.servicesKey" -}}services.yaml{{- end -}}

{{/* Checks that the schema cannot express; fails the render with the reason. */}}
{{- define "causeway.checkServices" -}}
{{- $s := .Values.services -}}
{{- if and $s.enabled (eq $s.source "kubernetes") -}}
{{- range $i, $c := .Values.conduits }}{{ if hasKey $c "servicesFile" -}}
{{- fail (printf "conduits[%d] (%s) has a servicesFile while services.source is kubernetes: the services come from one source; remove the servicesFile or set services.source: file" $i $c.name) -}}
{{- end }}{{ end -}}
{{- else if $s.enabled -}}
{{- $any := false -}}
{{- range .Values.conduits }}{{ if hasKey . "servicesFile" }}{{ $any = true }}{{ end }}{{ end -}}
{{- if not $any -}}
{{- fail "services.enabled is true but no conduit has a servicesFile: give conduits[].servicesFile (services: [] for none yet), or set services.source: kubernetes" -}}
{{- end -}}
{{- end -}}
{{- range $i, $c := .Values.conduits -}}
{{- range $j, $svc := ($c.servicesFile | default dict).services -}}
{{- range $k, $p := $svc.ports -}}
{{- if not (or $p.endpoints $p.targetPort) -}}
{{- fail (printf "conduits[%d].servicesFile.services[%d] (%s) ports[%d]: neither endpoints nor targetPort: the port would have no endpoint" $i $j $svc.name $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $s.portRange -}}
{{- $parts := splitList "-" $s.portRange -}}
{{- $first := first $parts | atoi -}}
{{- $last := last $parts | atoi -}}
{{- if or (gt $last 65535) (lt $last $first) -}}
{{- fail (printf "services.portRange %q: want first-last with 1 <= first <= last <= 65535" $s.portRange) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A CEL check of a ValidatingAdmissionPolicy (a printf format whose %[1]s
is the object) applied to the object written and to the one it replaces,
each when there is one (no object on DELETE, no oldObject on CREATE). */}}
{{- define "causeway.bothSlices" -}}
(object == null || ({{ printf . "object" }})) && (oldObject == null || ({{ printf . "oldObject" }}))
{{- end -}}
