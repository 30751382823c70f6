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

{{/* What target.config grants the sources (SPEC §5 "Trust boundary"), as the
     RBAC needs it: JSON {target namespace: podSecurity}. Each name of every
     sources[].namespaces entry, after namespaceMappings (a namespace without a
     mapping keeps its name); a glob cannot be an RBAC name, so it stands for
     the names it matches among the keys of namespaceMappings and
     target.managedNamespaces.extra (source namespaces), and one that matches
     none fails. Without sources, the file grants the source namespaces of
     namespaceMappings (podSecurity baseline), and extra may name no other.
     A target namespace two sources share gets the more permissive of their
     levels (the API server must admit what the importer lets through).
     sources: null is no sources (as target.yaml leaves it out). */}}
{{- define "drasync.granted" -}}
{{- $cfg := .Values.target.config -}}
{{- $nsm := $cfg.namespaceMappings | default dict -}}
{{- $extra := .Values.target.managedNamespaces.extra | default list -}}
{{- $rank := dict "restricted" 0 "baseline" 1 "privileged" 2 -}}
{{- $granted := list -}}
{{- if not (kindIs "invalid" $cfg.sources) -}}
{{- range $i, $s := $cfg.sources -}}
{{- if not (and (kindIs "map" $s) $s.name) -}}
{{- fail (printf "target.config.sources[%d]: expected {name, namespaces, podSecurity, relocate}, name being the source's name in authorizedSources" $i) -}}
{{- end -}}
{{- $level := $s.podSecurity | default "baseline" -}}
{{- if not (hasKey $rank $level) -}}
{{- fail (printf "target.config.sources[%d].podSecurity: %v is not privileged, baseline or restricted" $i $level) -}}
{{- end -}}
{{- if not (kindIs "slice" $s.namespaces) -}}
{{- fail (printf "target.config.sources[%d] (%s): namespaces must be a list of source namespaces, names or globs" $i $s.name) -}}
{{- end -}}
{{- range $s.namespaces -}}
{{- $pattern := toString . -}}
{{- if regexMatch `[*?[]` $pattern -}}
{{- $re := printf "^%s$" ($pattern | replace "*" ".*" | replace "?" "." | replace "[!" "[^") -}}
{{- $hit := false -}}
{{- range (concat (keys $nsm | sortAlpha) $extra) -}}
{{- if regexMatch $re (toString .) -}}
{{- $hit = true -}}
{{- $granted = append $granted (list (toString .) $level) -}}
{{- end -}}
{{- end -}}
{{- if not $hit -}}
{{- fail (printf "target.config.sources[%d].namespaces: '%s' is a glob, and RBAC grants namespaces by name: list the source namespaces it stands for in target.managedNamespaces.extra (or as keys of namespaceMappings)" $i $pattern) -}}
{{- end -}}
{{- else -}}
{{- $granted = append $granted (list $pattern $level) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $extra -}}
{{- $name := toString . -}}
{{- $found := false -}}
{{- range $granted -}}{{- if eq (index . 0) $name -}}{{- $found = true -}}{{- end -}}{{- end -}}
{{- if not $found -}}
{{- fail (printf "target.managedNamespaces.extra: '%s' is granted to no source by target.config.sources: the RBAC would let drasync-target write where no source may" $name) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- range $from, $to := $nsm -}}
{{- $granted = append $granted (list $from "baseline") -}}
{{- end -}}
{{- range $extra -}}
{{- if not (hasKey $nsm (toString .)) -}}
{{- fail (printf "target.managedNamespaces.extra: '%s' is not a namespace of namespaceMappings, and without target.config.sources a source may write only those: grant it in target.config.sources" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- range $granted -}}
{{- $from := index . 0 -}}
{{- $level := index . 1 -}}
{{- $to := (get $nsm $from) | default $from -}}
{{- if or (not (hasKey $out $to)) (gt (index $rank $level) (index $rank (get $out $to))) -}}
{{- $_ := set $out $to $level -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The namespaces drasync-target writes in, sorted, one per line: the
     granted target namespaces and, with managedNamespaces.drill, each one's
     drill scratch namespace NAME-drill. */}}
{{- define "drasync.managedNamespaces" -}}
{{- $granted := include "drasync.granted" . | fromJson -}}
{{- $names := list -}}
{{- range $ns, $level := $granted -}}
{{- $names = append $names $ns -}}
{{- if $.Values.target.managedNamespaces.drill -}}{{- $names = append $names (printf "%s-drill" $ns) -}}{{- end -}}
{{- end -}}
{{- range ($names | uniq | sortAlpha) }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* The drill label a scratch namespace carries: the granted namespace it
     drills ("" for a granted namespace). .granted: drasync.granted's dict. */}}
{{- define "drasync.drillOf" -}}
{{- $ns := .ns -}}
{{- if and .root.Values.target.managedNamespaces.drill (hasSuffix "-drill" $ns) (not (hasKey .granted $ns)) (hasKey .granted (trimSuffix "-drill" $ns)) -}}
{{- trimSuffix "-drill" $ns -}}
{{- end -}}
{{- end -}}
