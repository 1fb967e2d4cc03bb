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
ANSIBLE_COLLECTIONS_PATH="$repo/.cache/installed" ansible-galaxy collection install --force -p .cache/installed .cache/dist/maand-core-*.tar.gz >/dev/null
export ANSIBLE_COLLECTIONS_PATH="$repo/.cache/installed"
installed="$repo/.cache/installed/ansible_collections/maand/core"
# files the plugins read at run time (job_create's starter files, the hooks' TypeScript helper)
for path in files/job_create/* files/hooks/*; do
  cmp -s "$path" "$installed/$path" || { echo "install-collection: $path is missing or differs in the installed collection" >&2; exit 1; }
done
ansible-doc -t inventory maand.core.workspace >/dev/null
modules=0
for path in plugins/modules/*.py; do
  module="$(basename "$path" .py)"
  ansible-doc -t module "maand.core.$module" >/dev/null
  modules=$((modules + 1))
done
roles=0
for path in roles/*/; do
  [ -d "$path" ] || continue
  ansible-doc -t role "maand.core.$(basename "$path")" >/dev/null
  roles=$((roles + 1))
done
echo "install-collection: built and installed $(basename .cache/dist/maand-core-*.tar.gz); docs render for the inventory plugin, $modules modules/actions and $roles roles"
