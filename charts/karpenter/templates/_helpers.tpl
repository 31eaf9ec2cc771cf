{{/*
Names and labels. They are upstream Karpenter's, because Helm finds the objects of a release by
kind and name, and a Deployment's selector cannot change: keeping them lets `helm upgrade` take
over a release installed with upstream's chart.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "karpenter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The object name prefix: fullnameOverride; else the release name when it already contains the
chart name (release "karpenter" gives objects named "karpenter"); else "<release>-<name>".
*/}}
{{- define "karpenter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "karpenter.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels that select the controller pods (Deployment, Service, PDB, affinity). */}}
{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "karpenter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "karpenter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
An object's metadata: name, namespace (when given), the common labels plus `labels`, and
additionalAnnotations plus `annotations`. Takes a dict: root, name, and optionally namespace,
labels, annotations.
*/}}
{{- define "karpenter.metadata" -}}
name: {{ .name }}
{{- with .namespace }}
namespace: {{ . }}
{{- end }}
labels:
  {{- include "karpenter.labels" .root | nindent 2 }}
  {{- with .labels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with merge (dict) (.annotations | default dict) (.root.Values.additionalAnnotations | default dict) }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The subject every binding grants to. */}}
{{- define "karpenter.subject" -}}
- kind: ServiceAccount
  name: {{ include "karpenter.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* repository:tag[@digest]; the tag defaults to the chart's appVersion. */}}
{{- define "karpenter.controller.image" -}}
{{- $image := .Values.controller.image }}
{{- $ref := printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- if $image.digest }}
{{- $ref = printf "%s@%s" $ref $image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* The controller container's name. */}}
{{- define "karpenter.controller.containerName" -}}
{{- default "controller" .Values.controller.containerName }}
{{- end }}

{{/*
A copy of `term` with a labelSelector matching the controller pods when it has none, so that the
default anti-affinity and spread constraints apply to the controller's own replicas.
*/}}
{{- define "karpenter.withSelector" -}}
{{- $term := deepCopy .term }}
{{- if not (hasKey $term "labelSelector") }}
{{- $_ := set $term "labelSelector" (dict "matchLabels" (include "karpenter.selectorLabels" .root | fromYaml)) }}
{{- end }}
{{- toYaml $term }}
{{- end }}

{{/* .Values.affinity with selectors filled in on pod (anti-)affinity terms. */}}
{{- define "karpenter.affinity" -}}
{{- $affinity := deepCopy .Values.affinity }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with get $affinity $kind }}
{{- $required := list }}
{{- range .requiredDuringSchedulingIgnoredDuringExecution }}
{{- $required = append $required (include "karpenter.withSelector" (dict "term" . "root" $) | fromYaml) }}
{{- end }}
{{- if $required }}
{{- $_ := set . "requiredDuringSchedulingIgnoredDuringExecution" $required }}
{{- end }}
{{- $preferred := list }}
{{- range .preferredDuringSchedulingIgnoredDuringExecution }}
{{- $weighted := deepCopy . }}
{{- $_ := set $weighted "podAffinityTerm" (include "karpenter.withSelector" (dict "term" .podAffinityTerm "root" $) | fromYaml) }}
{{- $preferred = append $preferred $weighted }}
{{- end }}
{{- if $preferred }}
{{- $_ := set . "preferredDuringSchedulingIgnoredDuringExecution" $preferred }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $affinity }}
{{- end }}

{{/* .Values.topologySpreadConstraints with selectors filled in. */}}
{{- define "karpenter.topologySpreadConstraints" -}}
{{- $constraints := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $constraints = append $constraints (include "karpenter.withSelector" (dict "term" . "root" $) | fromYaml) }}
{{- end }}
{{- toYaml $constraints }}
{{- end }}

{{/*
The value of one string setting, through `tpl` (as upstream: settings may refer to other values,
e.g. "{{ .Values.global.clusterName }}").
*/}}
{{- define "karpenter.setting" -}}
{{- tpl (toString .value) .root }}
{{- end }}
