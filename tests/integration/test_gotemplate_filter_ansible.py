"""maand.core.gotemplate through a real ansible run (the filter as users call it)."""

from __future__ import annotations

import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(tmp_path, playbook):
    path = tmp_path / "play.yml"
    path.write_text(playbook)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"),
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_INVENTORY_ENABLED="host_list")
    return subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


PLAY = """
- hosts: all
  gather_facts: false
  vars:
    kv:
      maand/bucket: {api_http_port: "30000"}
      vars/job/api: {service_name: api-gateway}
    tpl: '{"listen": {{ "{{" }} get "maand/bucket" "api_http_port" {{ "}}" }}, "job": "{{ "{{" }} .Job {{ "}}" }}"}'
  tasks:
    - ansible.builtin.set_fact:
        out: "{{ tpl | maand.core.gotemplate({'NewVersion': '1'}, kv=kv, job='api', worker_ip='10.0.0.1') }}"
        plain: "{{ '{{range .}}<{{.}}>{{end}}' | maand.core.gotemplate([1, 'a']) }}"
"""


def test_filter_in_a_playbook(tmp_path):
    proc = _run(tmp_path, PLAY)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["ansible_facts"]
    assert facts["out"] == {"listen": 30000, "job": "api"} or \
        facts["out"] == '{"listen": 30000, "job": "api"}'
    assert facts["plain"] == "<1><a>"


def test_template_error_fails_the_task_with_line_and_cause(tmp_path):
    play = PLAY.replace('get "maand/bucket" "api_http_port"', 'get "vars/job/x" "k"')
    proc = _run(tmp_path, play)
    assert proc.returncode != 0
    assert "vars/job/x namespace is not available for job api" in proc.stdout


LOOKUP_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        port: "{{ lookup('maand.core.kv', 'maand/bucket', 'api_http_port', bucket=BUCKET) }}"
        jobvars: "{{ lookup('maand.core.kv', 'vars/job/api', bucket=BUCKET) }}"
        missing: "{{ lookup('maand.core.kv', 'vars/job/api', 'nope', bucket=BUCKET, default='d') }}"
    - ansible.builtin.set_fact:
        refused: "{{ lookup('maand.core.kv', 'vars/job/other', 'x', bucket=BUCKET, job='api', worker_ip='10.0.0.1') }}"
      ignore_errors: true
      register: refused_result
"""


def test_kv_lookup_in_a_playbook(tmp_path):
    import sys

    sys.path.insert(0, REPO)
    from tests.bucket_factory import make_bucket, write

    root = tmp_path / "bucket"
    make_bucket(root, [{"host": "10.0.0.1", "labels": ["api"]}],
                {"api": {"version": "1.0.0", "selectors": ["api"],
                         "resources": {"ports": {"api_http_port": {}}}}})
    write(str(root / "workspace" / "jobs" / "api" / "vars.toml"), 'name = "x"\n')
    build = subprocess.run(["ansible-playbook", "maand.core.build", "-e", "maand_bucket=%s" % root],
                           capture_output=True, text=True, timeout=300, check=False,
                           env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(
                               REPO, ".collections")), cwd=REPO)
    assert build.returncode == 0, build.stdout + build.stderr
    proc = _run(tmp_path, LOOKUP_PLAY.replace("BUCKET", "'%s'" % root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    facts = tasks[0]["hosts"]["localhost"]["ansible_facts"]
    assert facts["port"] == "30000" and facts["jobvars"] == {"name": "x"}
    assert facts["missing"] == "d"
    refused = tasks[1]["hosts"]["localhost"]
    assert refused.get("failed") and "vars/job/other namespace is not available" in refused["msg"]
