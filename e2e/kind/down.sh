#!/usr/bin/env bash
# e2e/kind/down.sh: stops the node registrar e2e/kind/up.sh started and deletes its kind cluster.
# Needs docker and kind; exits 2 naming what is missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${KIND_CLUSTER:-karpenter-e2e}
work=${WORK:-$root/target/kind}

for tool in docker kind; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "down.sh: $tool not found" >&2
        exit 2
    }
done

if [[ -f "$work/registrar.pid" ]]; then
    pid=$(cat "$work/registrar.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        echo "down.sh: stopped the registrar ($pid)"
    fi
    rm -f "$work/registrar.pid"
fi
if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    kind delete cluster --name "$cluster"
fi
