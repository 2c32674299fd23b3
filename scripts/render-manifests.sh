#!/usr/bin/env bash
# Renders deploy/kairship.yaml from the chart (deploy/chart/kairship) with its default
# values, for those who apply manifests instead of installing the chart. The chart is the
# one source of truth: tests/cluster/chart.rs fails when this file drifts from it.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM=${HELM:-$(bash scripts/real-fleet/build.sh 2>/dev/null | tail -n 1)/helm}
{
  echo "# Rendered from deploy/chart/kairship with its default values by"
  echo "# scripts/render-manifests.sh: change the chart, then run that script."
  echo "# kubectl create namespace kairship-system && kubectl apply -f deploy/crds/ -f deploy/kairship.yaml"
  echo "# (the Secrets kairship-tls and kairship-auth are yours to provide)."
  "$HELM" template kairship deploy/chart/kairship --namespace kairship-system
} >deploy/kairship.yaml.tmp
mv deploy/kairship.yaml.tmp deploy/kairship.yaml
echo "deploy/kairship.yaml rendered"
