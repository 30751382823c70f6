{{/* Labels of every object; component is "source" or "target". */}}
{{- define "drasync.labels" -}}
app.kubernetes.io/name: drasync
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: drasync
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "drasync.selector" -}}
app.kubernetes.io/name: drasync
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "drasync.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Pod and container security: the restricted Pod Security Standard,
     OpenShift restricted-v2 (no fixed UID, read-only root). */}}
{{- define "drasync.podSecurityContext" -}}
{{- $base := dict "runAsNonRoot" true "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (merge (deepCopy .Values.podSecurityContext) $base) -}}
{{- end -}}

{{- define "drasync.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The namespaces drasync-target writes in, sorted, one per line. */}}
{{- define "drasync.managedNamespaces" -}}
{{- $m := .Values.target.managedNamespaces -}}
{{- $names := list -}}
{{- range $src, $dst := (.Values.target.config.namespaceMappings | default dict) -}}
{{- $names = append $names $dst -}}
{{- if $m.drill -}}{{- $names = append $names (printf "%s-drill" $dst) -}}{{- end -}}
{{- end -}}
{{- range $m.extra -}}
{{- $names = append $names . -}}
{{- if $m.drill -}}{{- $names = append $names (printf "%s-drill" .) -}}{{- end -}}
{{- end -}}
{{- range ($names | uniq | sortAlpha) }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* The drill label a scratch namespace carries: the namespace it drills. */}}
{{- define "drasync.drillOf" -}}
{{- $ns := .ns -}}
{{- $of := "" -}}
{{- range $src, $dst := (.root.Values.target.config.namespaceMappings | default dict) -}}
{{- if eq (printf "%s-drill" $dst) $ns -}}{{- $of = $dst -}}{{- end -}}
{{- end -}}
{{- range .root.Values.target.managedNamespaces.extra -}}
{{- if eq (printf "%s-drill" .) $ns -}}{{- $of = . -}}{{- end -}}
{{- end -}}
{{- if .root.Values.target.managedNamespaces.drill -}}{{- $of -}}{{- end -}}
{{- end -}}
