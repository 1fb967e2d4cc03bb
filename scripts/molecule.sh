#!/usr/bin/env bash
# Every Molecule scenario (extensions/molecule/, default driver, the local SSH test fleet), from the
# repository root as Molecule's collection mode expects.
set -euo pipefail
cd "$(dirname "$0")/.."
exec molecule test --all
