#!/usr/bin/env bash
# The pep8 part of ansible-test sanity, in seconds (same pycodestyle rules: max line 160 and
# ansible-test's ignore list), for a fast loop before the full sanity run.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
git ls-files -z '*.py' | xargs -0 python3 -m pycodestyle --max-line-length 160 \
  --ignore=E402,W503,W504,E741,E203,E701,E704 "$@"
