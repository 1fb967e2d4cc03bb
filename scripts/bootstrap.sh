#!/usr/bin/env bash
# Install everything maand.core's example and tests need on a fresh Debian machine (run as root):
# Debian packages for the local SSH test fleet and the deploy (sshd, ssh, rsync, make, iproute2),
# the ShellCheck linter (ansible-test sanity runs it on scripts/), Go (the differential test of the
# Go text/template engine renders the same templates with real Go), Prometheus (Debian's 2.42: a real
# server deployed as a bucket's server job loads the shipped rules, tests/integration/test_prometheus_fleet.py),
# PostgreSQL (the state store tests start a server of their own: tests/fleet/pg.py),
# etcd (the quorum service of the rollout fleet test, tests/integration/test_rollout_fleet.py), haproxy (the load
# balancer of the zero-drop rolling upgrade, tests/integration/test_drain_haproxy_fleet.py),
# and the Python tooling from requirements-dev.txt (ansible-core 2.19, ansible, ansible-lint, molecule,
# pytest, hypothesis, jsonschema, fastjsonschema, ansible-runner, ansible-builder, psycopg, and protobuf + cramjam for
# the certificate expiry metrics' remote write to Prometheus).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"

packages=(openssh-server openssh-client rsync make iproute2 python3 util-linux git shellcheck golang-go prometheus postgresql
          etcd-server etcd-client haproxy)
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

# Bun runs maand's .ts/.js job commands (tests/integration/test_hooks_bun_fleet.py); it installs from the
# npm registry, whose `bun` package carries the platform binary.
if ! command -v bun >/dev/null 2>&1; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "bootstrap: apt-get install npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  echo "bootstrap: npm install -g bun"
  npm install -g --silent bun >/dev/null
  bun --version >/dev/null
fi

if ! "$python" -m pip install --quiet --disable-pip-version-check -r "$repo/requirements-dev.txt"; then
  echo "bootstrap: pip install failed" >&2
  exit 1
fi
echo "bootstrap: $(ansible --version | head -1), $(ansible-lint --version 2>/dev/null | head -1 | cut -c1-40), molecule $("$python" -m pip show molecule 2>/dev/null | sed -n 's/^Version: //p')"
