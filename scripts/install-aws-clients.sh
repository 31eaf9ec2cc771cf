#!/usr/bin/env bash
# install-aws-clients.sh DEST: the real AWS clients the wire check runs against `fakecloud serve`,
# unless DEST already holds exactly these pins.
#
# - AWS CLI v1 and boto3 (PyPI, pinned) in a venv at DEST/venv: botocore speaks SQS's JSON
#   protocol (X-Amz-Target: AmazonSQS.*);
# - AWS CLI v2 from Debian's `awscli` package (2.9.19 on bookworm; the only v2 in the registries
#   we may use): it still speaks SQS's Query protocol (Action=...&Version=2012-11-05). Installed
#   with apt-get when /usr/bin/aws is missing; linked as DEST/bin/aws2.
set -euo pipefail

PINS=('awscli==1.46.3' 'boto3==1.44.5')

dest=${1:?usage: install-aws-clients.sh DEST}
mkdir -p "$dest/bin"
stamp="$dest/.pins"

if ! [[ -x "$dest/venv/bin/aws" && "$(cat "$stamp" 2>/dev/null)" == "${PINS[*]}" ]]; then
    rm -rf "$dest/venv"
    python3 -m venv "$dest/venv"
    "$dest/venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
    echo "${PINS[*]}" > "$stamp"
    echo "install-aws-clients.sh: $dest/venv has ${PINS[*]}"
fi

if ! /usr/bin/aws --version 2>/dev/null | grep -q '^aws-cli/2\.'; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "install-aws-clients.sh: AWS CLI v2 missing and not root: run 'apt-get install -y awscli' first" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq awscli > /dev/null
    echo "install-aws-clients.sh: installed $(/usr/bin/aws --version 2>&1)"
fi
ln -sf /usr/bin/aws "$dest/bin/aws2"
