"""The emulation tier: real namespaces, bridges and qdiscs on this host (root only).

Every test here is skipped with a reason when vnetbench cannot create network namespaces, and
leaves the host as it found it: the ``host_unchanged`` fixture snapshots interfaces, namespaces,
bridges, qdiscs, addresses, routes, mounts and vnetbench cgroups before the test, takes down
whatever vnetbench topology is still up afterwards (even when the test failed) and then
compares.
"""

import json
import os
import shutil
import subprocess

import pytest

from harness import hoststate


def _why_not() -> str | None:
    if not os.path.exists("/proc/self/ns/net"):
        return "not Linux with network namespaces"
    if os.geteuid() != 0:
        return "needs root (network namespaces, bridges, tc)"
    for tool in ("ip", "tc", "nsenter", "unshare"):
        if not shutil.which(tool):
            return f"needs {tool}"
    probe = subprocess.run(["unshare", "--net", "ip", "link", "add", "vnbprobe0", "type", "bridge"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create namespaces and bridges here: {probe.stderr.strip()}"
    return None


WHY_NOT = _why_not()
requires_netns = pytest.mark.skipif(WHY_NOT is not None, reason=f"emulation tier: {WHY_NOT}")


def snapshot() -> dict:
    """What vnetbench may change on the host, in a form that compares equal when it is unchanged."""
    return hoststate.network()


class Used:
    """The topologies a test works with; whatever of them is still up at the end is taken down."""

    def __init__(self, before: dict):
        self.before = before
        self.names = []

    def __call__(self, *names: str):
        self.names.extend(names)
        return names[0] if len(names) == 1 else names


@pytest.fixture
def host_unchanged():
    """Yields ``use(name, ...)``: register each topology the test brings up (even indirectly)."""
    from vnetbench.topologies.model import spec
    from vnetbench.topologies.thishost import state
    from vnetbench.topologies.netns import life

    used = Used(snapshot())
    yield used
    for name in used.names:
        topology = spec.load_topology(name)
        if state.read(topology.id) is not None:
            life.down(topology.id)
    life.cleanup()  # what a killed run of this test left, and nothing that is in use
    after = snapshot()
    before = used.before
    assert after == before, "the host changed: " + json.dumps(
        {k: {"gone": sorted(set(map(str, before[k])) - set(map(str, after[k]))),
             "new": sorted(set(map(str, after[k])) - set(map(str, before[k])))}
         for k in before if before[k] != after[k]}, indent=1)
