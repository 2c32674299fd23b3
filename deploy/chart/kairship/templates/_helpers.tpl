{{/* The release's full name: the release name, or release-chart when it does not hold the chart's name. */}}
{{- define "kairship.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kairship.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kairship.labels" -}}
{{ include "kairship.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: kairship
app.kubernetes.io/part-of: kairship
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "kairship.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kairship.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kairship.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The controller-manager role serves no API, so it needs neither TLS nor auth. */}}
{{- define "kairship.servesApi" -}}
{{- if ne .Values.role "controller-manager" -}}true{{- end -}}
{{- end -}}

{{/* Namespaces whose Secrets may hold External instances' kubeconfigs, as a JSON list. */}}
{{- define "kairship.kubeconfigNamespaces" -}}
{{- default (list .Release.Namespace) .Values.kubeconfigSecretNamespaces | uniq | toJson -}}
{{- end -}}

{{/* Namespaces of managed instances' Karmada objects, as a JSON list. */}}
{{- define "kairship.managedNamespaces" -}}
{{- prepend .Values.managed.allowedNamespaces (default .Release.Namespace .Values.managedNamespace) | uniq | toJson -}}
{{- end -}}
