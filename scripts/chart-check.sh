#!/usr/bin/env bash
# chart-check.sh TOOLS OUT: installs (or reuses) the pinned Helm and validators under TOOLS, then
# runs scripts/chart_check.py, which writes its renderings to OUT, and shellcheck over the kind
# target's scripts (e2e/kind/*.sh) and these (scripts/*.sh). What `cargo xtask chart` runs.
#
# Bounded: each install may take 300 s (a cold pip cache needs about a minute), the checks 300 s.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=${1:?usage: chart-check.sh TOOLS OUT}
out=${2:?usage: chart-check.sh TOOLS OUT}

timeout 300 "$root/scripts/install-helm.sh" "$tools/helm-v3.19.0"
timeout 300 "$root/scripts/install-validators.sh" "$tools/validators"
status=0
"$tools/validators/bin/shellcheck" "$root"/e2e/kind/*.sh "$root"/scripts/*.sh || status=$?
echo "shellcheck: e2e/kind/*.sh scripts/*.sh (exit $status)"
"$tools/validators/bin/python" "$root/scripts/chart_check.py" \
    --root "$root" --helm "$tools/helm-v3.19.0/bin/helm" --out "$out" --budget-seconds 300 || status=$?
echo "chart check: ${SECONDS} s in all, installs included"
exit "$status"
