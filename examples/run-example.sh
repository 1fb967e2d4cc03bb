#!/usr/bin/env bash
# The maand.core example, end to end, on a local test fleet of 3 SSH hosts (needs root):
#   bootstrap -> fleet up -> facts (capacity into workers.json) -> build (catalog) -> inventory graph
#   -> deploy plan (--check --diff) -> deploy -> the result on every host -> a second deploy that
#   changes nothing -> a content change rolled out as a reload -> fleet down.
# The bucket is a copy of examples/hello in a temp folder; MAAND_EXAMPLE_KEEP=1 keeps it and the fleet.
set -euo pipefail
set -o errtrace
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
if [ "${MAAND_SKIP_BOOTSTRAP:-0}" != 1 ]; then
  bash scripts/bootstrap.sh
fi
python3 -c "import conftest" >/dev/null   # links .collections/ansible_collections/maand/core -> this repo
export ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$repo/.collections" ANSIBLE_NOCOLOR=1

work="$(mktemp -d /tmp/maand-example.XXXXXX)"
fleet="$work/fleet"
bucket="$work/bucket"
cleanup() {
  if [ "${MAAND_EXAMPLE_KEEP:-0}" = 1 ]; then
    echo "kept: bucket $bucket, fleet $fleet (python3 tests/fleet/fleet.py down --state-dir $fleet)"
  else
    python3 tests/fleet/fleet.py down --state-dir "$fleet" >/dev/null || true
    rm -rf "$work"
  fi
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "local fleet: 3 sshd hosts, each in its own network and mount namespace"
python3 tests/fleet/fleet.py up --state-dir "$fleet" --hosts 3 --name example >/dev/null
cp -r examples/hello "$bucket"
python3 tests/fleet/fleet.py bucket-key --state-dir "$fleet" --bucket "$bucket" >/dev/null
# Onboarding: only host and labels; the first two hosts also serve the web job.
python3 - "$fleet/fleet.json" "$bucket/workspace/workers.json" <<'PY'
import json, sys
hosts = json.load(open(sys.argv[1]))["hosts"]
workers = [{"host": h["address"], "labels": ["worker"] + (["web"] if i < 2 else []),
            "tags": {"zone": "zone-%d" % (i % 2)}} for i, h in enumerate(hosts)]
open(sys.argv[2], "w").write(json.dumps(workers, indent=2) + "\n")
PY
cat "$bucket/workspace/workers.json"

say "facts: probe memory, cpu and disk over SSH and write them into workers.json (all or nothing)"
ansible-playbook maand.core.facts -e maand_bucket="$bucket" | grep -E '^(ok|changed|fatal)|->|RECAP|localhost' || true

say "build: place, validate, write data/catalog.json"
ansible-playbook maand.core.build -e maand_bucket="$bucket" | sed -n '/TASK \[Validate/,/PLAY RECAP/p' | grep -v '^\s*$' | grep -v RECAP

say "inventory: the placement as Ansible sees it"
ansible-inventory -i "$bucket/maand.yml" --graph

say "plan: ansible-playbook -i bucket/maand.yml maand.core.deploy --check --diff (changes nothing)"
ansible-playbook -i "$bucket/maand.yml" maand.core.deploy --check --diff | grep -E '^\s*(wave|job|  |[a-z]+ .*@)|start|skip' | head -40 || true

say "deploy (as an operator sees it: the stdout callback maand.core.deploy, which the ansible.cfg of maand.core.init sets)"
ANSIBLE_STDOUT_CALLBACK=maand.core.deploy ansible-playbook -i "$bucket/maand.yml" maand.core.deploy > "$work/deploy.log" \
  || { cat "$work/deploy.log"; exit 1; }
grep -vE '^(PLAY \[|$)' "$work/deploy.log"

say "the result on every host (store.conf is rendered per worker from store.conf.tpl)"
bucket_id="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bucket_id"])' "$bucket/data/catalog.json")"
for addr in $(python3 -c 'import json,sys; print(" ".join(h["address"] for h in json.load(open(sys.argv[1]))["hosts"]))' "$fleet/fleet.json"); do
  echo "--- $addr"
  ssh -i "$fleet/id_ed25519" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "root@$addr" \
    "cd /opt/worker/$bucket_id && cat worker.json && echo && ls jobs && cat jobs/store/data/status && grep -E '^(worker|peers|web) =' jobs/store/store.conf && (curl -s -m 2 http://127.0.0.1:8080/ 2>/dev/null | grep -o 'Deployed by maand.core' || python3 -c \"import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:8080/',timeout=2).read().decode().split('<p>')[1].split('<')[0])\" 2>/dev/null || echo 'no web job here')"
done

say "a second deploy changes nothing"
ansible-playbook -i "$bucket/maand.yml" maand.core.deploy | grep -E 'changed=' 

say "status: job x worker x state x deployed version x running (make status), one round trip per worker"
ansible-playbook -i "$bucket/maand.yml" maand.core.status | sed -n '/^JOB /,/^status:/p'

say "a content change under www/ rolls out as a reload, one worker at a time, health-gated"
echo '<p>Version 2.</p>' >> "$bucket/workspace/jobs/web/www/index.html"
# the catalog records a fingerprint of the workspace: a deploy refuses a changed workspace until it is rebuilt
ansible-playbook maand.core.build -e maand_bucket="$bucket" | grep -E 'changed=|failed=[1-9]'
ansible-playbook -i "$bucket/maand.yml" maand.core.deploy --check --diff | grep -E 'reload|restart' | head -5 || true
ANSIBLE_STDOUT_CALLBACK=maand.core.deploy ansible-playbook -i "$bucket/maand.yml" maand.core.deploy \
  | grep -E 'plan:|batch|^JOB|^(store|web) |^workers:|^deploy done'
ansible-playbook -i "$bucket/maand.yml" maand.core.job -e maand_job=web -e maand_target=status | grep -E 'serving|not running' | head -3 || true

say "done: the example deployed, redeployed with no change, and rolled out a change"
