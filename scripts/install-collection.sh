#!/usr/bin/env bash
# Build the collection tarball and install it (a real ansible-galaxy install, not a symlink) into
# .cache/installed, then check that every plugin's documentation renders from the installed copy.
# The tests themselves run against the working tree through .collections/ (see conftest.py).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
rm -rf .cache/dist .cache/installed
mkdir -p .cache/dist .cache/installed
ansible-galaxy collection build --force --output-path .cache/dist . >/dev/null
ansible-galaxy collection install --force -p .cache/installed .cache/dist/maand-core-*.tar.gz >/dev/null
export ANSIBLE_COLLECTIONS_PATH="$repo/.cache/installed"
ansible-doc -t inventory maand.core.workspace >/dev/null
for module in $(ls plugins/modules/*.py | xargs -n1 basename | sed 's/\.py$//'); do
  ansible-doc -t module "maand.core.$module" >/dev/null
done
for role in $(ls roles 2>/dev/null); do
  ansible-doc -t role "maand.core.$role" >/dev/null
done
echo "install-collection: built and installed $(ls .cache/dist), docs render for inventory, $(ls plugins/modules/*.py | wc -l) modules/actions and $(ls roles 2>/dev/null | wc -l) roles"
