"""Offline stand-in for ansible-test's pip bootstrap script (get-pip.py).

ansible-test downloads get-pip from ci-files.testing.ansible.com, which this project's machines cannot
reach. This does the same job with the pip wheel that scripts/sanity.sh fetched from PyPI: it runs pip
from that wheel to install the packages ansible-test asks for (pip, setuptools, wheel pins) into the
fresh virtual environment. get-pip's own flags --no-setuptools / --no-wheel are accepted and dropped.
"""

import glob
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
wheels = sorted(glob.glob(os.path.join(here, "pip-*.whl")))
if not wheels:
    sys.exit("no pip wheel next to %s: run scripts/sanity.sh, which downloads it" % __file__)
sys.path.insert(0, wheels[-1])
from pip._internal.cli.main import main  # noqa: E402

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--disable-pip-version-check"] + args))
