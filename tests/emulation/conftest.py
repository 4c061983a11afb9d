"""The emulation tier: real namespaces, bridges and qdiscs on this host (root only).

Every test here is skipped with a reason when vnetbench cannot create network namespaces, and
leaves the host as it found it: the ``host_unchanged`` fixture snapshots interfaces, namespaces,
bridges, qdiscs, addresses, routes, mounts and vnetbench cgroups before the test, takes down
whatever vnetbench topology is still up afterwards (even when the test failed) and then
compares.
"""

import json
import os
import re
import shutil
import subprocess

import pytest


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


def _json(*argv) -> list:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


# vnetbench's netns names (plan.py); other tiers' objects (the deploy tier's sshd namespaces,
# "vnbt...") may come and go while these tests run, and are left out of the comparison
OURS = re.compile(r"^vnb(-[0-9a-f]{4}-|[0-9a-f]{4}[spvu])")


def _considered(name) -> bool:
    name = os.path.basename(str(name or ""))
    return not name.startswith("vnb") or bool(OURS.match(name))


def snapshot() -> dict:
    """What vnetbench may change on the host, in a form that compares equal when it is unchanged."""
    from vnetbench.topologies import linux

    links = [l for l in _json("ip", "-j", "link", "show") if _considered(l["ifname"])]
    cgroups = []
    for kind in ("cpuset", "memory"):
        root = linux.cgroup_root(kind)
        if root:
            cgroups += sorted(str(p) for p in root.glob("vnb-*"))
    return {
        "interfaces": sorted((l["ifname"], l.get("master"), l.get("link_type")) for l in links),
        "bridges": sorted(l["ifname"] for l in _json("ip", "-j", "link", "show", "type", "bridge")
                          if _considered(l["ifname"])),
        "namespaces": sorted(n for n in os.listdir("/run/netns") if _considered(n)) if os.path.isdir("/run/netns") else [],
        "qdiscs": sorted((q["dev"], q["kind"], q.get("handle"), q.get("parent", ""))
                         for q in _json("tc", "-j", "qdisc", "show") if _considered(q["dev"])),
        "addresses": sorted((a["ifname"], i["local"], i["prefixlen"]) for a in _json("ip", "-j", "addr", "show")
                            if _considered(a["ifname"]) for i in a.get("addr_info", [])),
        "routes": sorted(json.dumps(r, sort_keys=True) for r in _json("ip", "-j", "-4", "route", "show", "table", "all")
                         if _considered(r.get("dev"))),
        "mounts": sorted(target for target in (line.split()[4] for line in open("/proc/self/mountinfo"))
                         if _considered(target)),
        "cgroups": cgroups,
        "states": sorted(p for p in os.listdir("/run/vnetbench") if not p.startswith("."))
        if os.path.isdir("/run/vnetbench") else [],
    }


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
    from vnetbench.topologies import netns, spec, state

    used = Used(snapshot())
    yield used
    for name in used.names:
        topology = spec.load_topology(name)
        if state.read(topology.id) is not None:
            netns.down(topology.id)
    netns.cleanup()  # what a killed run of this test left, and nothing that is in use
    after = snapshot()
    before = used.before
    assert after == before, "the host changed: " + json.dumps(
        {k: {"gone": sorted(set(map(str, before[k])) - set(map(str, after[k]))),
             "new": sorted(set(map(str, after[k])) - set(map(str, before[k])))}
         for k in before if before[k] != after[k]}, indent=1)
