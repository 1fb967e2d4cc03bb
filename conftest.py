"""Repository-wide pytest setup.

Makes the collection importable as ``ansible_collections.maand.core`` (a symlink under .collections/,
never committed) for the unit tests and for every ansible-playbook the integration tests start, and
loads the local SSH test fleet fixtures.
"""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent
COLLECTIONS = REPO / ".collections"


def _link_collection():
    link = COLLECTIONS / "ansible_collections" / "maand" / "core"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or os.readlink(link) != str(REPO):
        tmp = link.with_name("core.tmp")
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(REPO)
        os.replace(tmp, link)


_link_collection()
sys.path.insert(0, str(COLLECTIONS))
os.environ.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(COLLECTIONS))

pytest_plugins = ["tests.fleet.pytest_fleet", "tests.fleet.pg"]

try:  # property tests measure rules, not speed: no per-example deadline on 2 shared, noisy cores
    from hypothesis import HealthCheck, settings as _hyp_settings

    _hyp_settings.register_profile("maand", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "maand"))
except ImportError:  # pragma: no cover - hypothesis is in requirements-dev.txt
    pass
