# Fleet fixtures for the tests in this directory. Other test trees can do the same, or use
# `pytest_plugins = ["tests.fleet.pytest_fleet"]` from the top-level conftest.
from .pytest_fleet import fleet3, fleet_factory  # noqa: F401
