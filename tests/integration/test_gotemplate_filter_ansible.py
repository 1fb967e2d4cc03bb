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
                          capture_output=True, text=True, env=env, timeout=300)


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
