#!/usr/bin/env bash
# e2e/kind/up.sh [TEST-FILTER...]: the end-to-end suite against a kind cluster (issue 21, target b).
#
# 1. creates the kind cluster $KIND_CLUSTER (default karpenter-e2e) unless it exists;
# 2. builds the controller image from the repository's Dockerfile and loads it into kind;
# 3. starts the node registrar on this host: `karpenter-sim cloud` (the fake cloud's AWS endpoint,
#    with its control API, plus the kubelet of every node its instances become, over kind's API
#    server), listening on the kind network's gateway so the controller pod reaches it;
# 4. installs charts/karpenter with `helm upgrade --install`, the controller pointed at the fake
#    cloud (AWS_ENDPOINT_URL, fake credentials, its interruption queue);
# 5. runs `cargo test -p karpenter-e2e --test e2e` with E2E_KUBECONFIG and E2E_AWS_ENDPOINT set.
#
# The registrar keeps running afterwards (its pid and log are in $WORK); e2e/kind/down.sh stops it
# and deletes the cluster. Needs docker (with a running engine), kind, helm, kubectl, cargo, curl
# and python3; exits 2 naming what is missing. Linux hosts: the controller reaches the registrar
# through the kind network's gateway address (on Docker Desktop set REGISTRAR_HOST to
# host.docker.internal).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cluster=${KIND_CLUSTER:-karpenter-e2e}
image=${IMAGE:-karpenter-rs/karpenter:e2e}
work=${WORK:-$root/target/kind}
port=${REGISTRAR_PORT:-4566}
# The cluster name the suite's examples are written for (discovery tags, node role).
cloud_cluster=${E2E_CLUSTER_NAME:-demo}

missing() {
    echo "up.sh: $1" >&2
    exit 2
}

for tool in docker kind helm kubectl cargo curl python3; do
    command -v "$tool" >/dev/null 2>&1 || case $tool in
        docker) missing "docker not found: install Docker (https://docs.docker.com/engine/install/)" ;;
        kind) missing "kind not found: install it (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)" ;;
        helm) missing "helm not found: run scripts/install-helm.sh target/tools/helm and put its bin/ on PATH" ;;
        *) missing "$tool not found" ;;
    esac
done
docker info >/dev/null 2>&1 ||
    missing "docker is installed but no Docker engine answers ('docker info' failed): kind needs one"

mkdir -p "$work"

echo "up.sh: kind cluster $cluster"
if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    kind create cluster --name "$cluster" --wait 180s
fi
kind get kubeconfig --name "$cluster" >"$work/kubeconfig"
export KUBECONFIG="$work/kubeconfig"

echo "up.sh: image $image (Dockerfile)"
docker build -t "$image" --build-arg KARPENTER_COMMIT="$(git -C "$root" rev-parse HEAD 2>/dev/null || true)" "$root"
kind load docker-image "$image" --name "$cluster"

echo "up.sh: node registrar (karpenter-sim cloud)"
cargo build --quiet --manifest-path "$root/Cargo.toml" -p karpenter-sim --features serve --bin karpenter-sim
target=${CARGO_TARGET_DIR:-$root/target}
host=${REGISTRAR_HOST:-$(docker network inspect kind -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}} {{end}}{{end}}' | awk '{print $1}')}
[[ -n "$host" ]] || missing "cannot find the kind network's gateway: set REGISTRAR_HOST"
if [[ -f "$work/registrar.pid" ]] && kill -0 "$(cat "$work/registrar.pid")" 2>/dev/null; then
    kill "$(cat "$work/registrar.pid")"
    sleep 1
fi
"$target/debug/karpenter-sim" cloud --kubeconfig "$work/kubeconfig" --cluster "$cloud_cluster" \
    --aws-listen "0.0.0.0:$port" >"$work/registrar.out" 2>"$work/registrar.err" &
echo $! >"$work/registrar.pid"
for _ in $(seq 60); do
    grep -q '^AWS_ENDPOINT_URL=' "$work/registrar.out" && break
    kill -0 "$(cat "$work/registrar.pid")" 2>/dev/null || {
        cat "$work/registrar.err" >&2
        missing "karpenter-sim cloud exited (log above)"
    }
    sleep 1
done
grep -q '^AWS_ENDPOINT_URL=' "$work/registrar.out" || missing "karpenter-sim cloud did not get ready in 60 s"
local_url="http://127.0.0.1:$port"
cluster_url="http://$host:$port"
queue=$(curl -fsS "$local_url/fakecloud/" | python3 -c 'import json, sys; print(json.load(sys.stdin)["queueUrl"].rsplit("/", 1)[-1])')

echo "up.sh: helm install (controller -> $cluster_url, queue $queue)"
helm upgrade --install karpenter "$root/charts/karpenter" --namespace kube-system \
    --set "controller.image.repository=${image%:*}" --set "controller.image.tag=${image##*:}" \
    --set replicas=1 \
    --set "settings.clusterName=$cloud_cluster" --set "settings.interruptionQueue=$queue" \
    --set-json "controller.env=[{\"name\":\"AWS_ENDPOINT_URL\",\"value\":\"$cluster_url\"},{\"name\":\"AWS_REGION\",\"value\":\"us-west-2\"},{\"name\":\"AWS_ACCESS_KEY_ID\",\"value\":\"fake\"},{\"name\":\"AWS_SECRET_ACCESS_KEY\",\"value\":\"fake\"}]" \
    --wait --timeout 5m

echo "up.sh: the suite"
E2E_KUBECONFIG="$work/kubeconfig" E2E_AWS_ENDPOINT="$local_url" E2E_CLUSTER_NAME="$cloud_cluster" \
    cargo test --manifest-path "$root/Cargo.toml" -p karpenter-e2e --test e2e -- --test-threads 32 "$@" || {
    status=$?
    kubectl -n kube-system logs deployment/karpenter --tail 200 >&2 || true
    echo "up.sh: the suite failed; the registrar's log is $work/registrar.out" >&2
    exit "$status"
}
