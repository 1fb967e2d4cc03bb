#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the collection at .../ansible_collections/maand/core
# (ansible-test needs that physical layout; a symlink is not accepted).
# Offline detail: ansible-test bootstraps pip in each test venv with a script from
# ci-files.testing.ansible.com, unreachable here; we pre-seed its cache with an equivalent
# (scripts/ansible-test-get-pip.py) that installs pip from the PyPI pip wheel.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
pip_version="$("$python" - <<'PY'
import re, ansible_test, os
text = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='([0-9.]+)'", text).group(1))
PY
)"
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
if ! ls "$cache"/pip-"$pip_version"-*.whl >/dev/null 2>&1; then
  "$python" -m pip download --quiet --no-deps --only-binary=:all: -d "$cache" "pip==$pip_version"
fi
cp "$repo/scripts/ansible-test-get-pip.py" "$cache/get_pip_${pip_version//./_}.py"

work="${MAAND_SANITY_DIR:-/tmp/maand-sanity}"
dest="$work/ansible_collections/maand/core"
rm -rf "$work"
mkdir -p "$dest"
# Copy only what git tracks (plus uncommitted edits of tracked files): what a release would hold.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | grep -zv '^\.collections' | xargs -0 -I{} cp --parents -P {} "$dest/")
cd "$dest"
git init -q .
git add -A >/dev/null 2>&1
ansible-test sanity --venv --python "$pyver" --color no "$@"
