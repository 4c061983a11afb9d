"""Compatibility only, until tests/unit/test_backend_registry.py imports vnetbench.topologies.netns.plan: remove then."""
from .netns.plan import *  # noqa: F401,F403
