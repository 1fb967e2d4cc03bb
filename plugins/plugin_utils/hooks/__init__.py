# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job commands (hooks) as maand runs them on the controller (stage 4).

commands.py (which commands an event runs), run.py (one process per allocation), points.py (where
build, deploy and job_command run them), runtime_api.py (maand's runtime API on localhost).

The door: points.py (where build, deploy and job_command run job commands).
"""
