# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job specs: Maelstrom's job and container specs (seed 004, docs/jobspec.md). PRIVATE to the collection.

Rank 1.5: above the bucket it reads (and the worker paths), below the build and the deploy that use it.

environment.py (``$env``/``$prev`` substitution, the environment elements; SpecError), spec.py (the parent
chain folded in: collapse_spec), image.py (a local OCI image parent), validate.py (the job-spec fields
checked, FieldProblem), schedule.py (Maelstrom's start order, the LPT plan of a worker's slots and the run
history behind the estimates), build.py (what build does: containers, images, the catalog's spec),
layers.py (a spec's layers stacked under the job's files for the deploy), deploy.py (what deploy does:
the environment expanded, the worker order, the agent's op fields, the run history file).

The door: this file (``from ..jobspec import ...``; the names in ``__all__``).
"""

from __future__ import annotations

from .environment import SpecError, SubstituteError, environment_check, environment_eval, parse_environment, substitute
from .spec import CollapsedSpec, ContainerIndex, collapse_spec, collapse_specs
from .image import ImageConfig, IntegratedSpec, integrate_image, job_environment_of, read_oci_layout
from .schedule import (PRIORITY_MAX, PRIORITY_MIN, HistoryHint, QueuedJob, SlotRun, history_lookup, history_record,
                       lpt_plan, schedule_order)
from .validate import JOB_SPEC_FIELDS, FieldProblem, validate_container, validate_job_spec
from .build import check
from .layers import LayerError, stacked
from .deploy import (HISTORY_FILE, WORKER_ORDER, EnvError, check_env, check_ids, env_digest_key, expand, load_history,
                     op_spec, record_history, runtime_op, slots_for, specs_of, with_env, worker_order)

__all__ = [
    # environment.py
    "SpecError", "SubstituteError", "environment_check", "environment_eval", "parse_environment", "substitute",
    # spec.py
    "CollapsedSpec", "ContainerIndex", "collapse_spec", "collapse_specs",
    # image.py
    "ImageConfig", "IntegratedSpec", "integrate_image", "job_environment_of", "read_oci_layout",
    # schedule.py
    "PRIORITY_MAX", "PRIORITY_MIN", "HistoryHint", "QueuedJob", "SlotRun", "history_lookup", "history_record",
    "lpt_plan", "schedule_order",
    # validate.py
    "JOB_SPEC_FIELDS", "FieldProblem", "validate_container", "validate_job_spec",
    # build.py
    "check",
    # layers.py
    "LayerError", "stacked",
    # deploy.py
    "HISTORY_FILE", "WORKER_ORDER", "EnvError", "check_env", "check_ids", "env_digest_key", "expand", "load_history",
    "op_spec", "record_history", "runtime_op", "slots_for", "specs_of", "with_env", "worker_order",
]
