# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One deploy step on one worker (deploy/agent_step.py: one rsync for all its jobs that also runs the agent's
step, one result file); this action is its Transport over Ansible's ssh connection
(docs: plugins/modules/deploy_agent.py)."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.maand.core.plugins.plugin_utils import adapter
from ansible_collections.maand.core.plugins.plugin_utils.adapter import MaandAction
from ansible_collections.maand.core.plugins.plugin_utils import deploy

ARGUMENT_SPEC = adapter.spec_for("deploy_agent")


class ActionModule(MaandAction):
    """deploy/agent_step.Transport: exec (MaandAction.exec), rsync (the controller's), rsync_target (Ansible's ssh)."""

    ARGUMENT_SPEC = ARGUMENT_SPEC
    _supports_check_mode = False

    rsync = staticmethod(deploy.run_rsync)

    def rsync_target(self):
        conn = self._connection
        if getattr(conn, "transport", None) != "ssh" or not hasattr(conn, "_build_command"):
            raise AnsibleError("maand.core.deploy_agent needs the ssh connection plugin (got %s)"
                               % getattr(conn, "transport", "?"))
        if conn.get_option("password"):
            raise AnsibleError("maand.core.deploy_agent: rsync cannot use ansible_password; use an SSH key")
        argv = [to_text(a) for a in conn._build_command(conn.get_option("ssh_executable") or "ssh", "ssh")]
        return conn.get_option("host") or conn.host, argv, bool(self._play_context.become)

    def act(self, result, args, task_vars):
        call = deploy.AgentCall(args["bucket"], args["run_dir"], args["host"], args["step"],
                                timeout=args["timeout"], tail=args["tail"], verify_host=args["verify_host"],
                                python=self.worker_python(task_vars, args["host"]))
        result.update(deploy.apply(call, self).as_result())
        return result
