#!/usr/bin/env bash
# Install everything maand.core's example and tests need on a fresh Debian machine (run as root):
# Debian packages for the local SSH test fleet and the deploy (sshd, ssh, rsync, make, iproute2),
# the ShellCheck linter (ansible-test sanity runs it on scripts/), Go (the differential test of the
# Go text/template engine renders the same templates with real Go), etcd (the quorum service of the
# rollout fleet test, tests/integration/test_rollout_fleet.py),
# and the Python tooling from requirements-dev.txt (ansible-core 2.19, ansible, ansible-lint, molecule,
# pytest, hypothesis, jsonschema, fastjsonschema, ansible-runner, ansible-builder).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"

packages=(openssh-server openssh-client rsync make iproute2 python3 util-linux git shellcheck golang-go etcd-server etcd-client)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! "$python" -m pip install --quiet --disable-pip-version-check -r "$repo/requirements-dev.txt"; then
  echo "bootstrap: pip install failed" >&2
  exit 1
fi
echo "bootstrap: $(ansible --version | head -1), $(ansible-lint --version 2>/dev/null | head -1 | cut -c1-40), molecule $("$python" -m pip show molecule 2>/dev/null | sed -n 's/^Version: //p')"
