# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Day-2 verbs over a built bucket (stage 6).

status.py, cat.py, gc.py, health_check.py, run_command.py, facts.py, scaffold.py (job_create),
job_target.py (maand.core.job's make target: the deploy_job action),
extra_vars.py, state_move.py (maand.core.state: a bucket's state between data/ and PostgreSQL).

Each verb's module is its door (ops/<verb>.py); the actions call nothing else of ops/.
"""
