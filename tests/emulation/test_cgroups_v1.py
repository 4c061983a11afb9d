"""On this cgroup v1 (or hybrid) host the VMs keep their v1 groups, and the CLI says so.

The v2 path runs in the guest tier (tests/guest); this is the same code on the host's own kind.
"""

import os

import pytest

from conftest import vnetbench
from emulation.conftest import requires_netns, snapshot

pytestmark = [requires_netns, pytest.mark.timeout(240)]


def _v1_host():
    from vnetbench.topologies.thishost import cgroups

    return cgroups.mode() in ("v1", "hybrid") and cgroups.v1_root("cpuset") and cgroups.v1_root("memory")


requires_v1 = pytest.mark.skipif(not _v1_host(), reason="needs a cgroup v1 or hybrid host with cpuset and memory")


@requires_v1
def test_show_and_up_say_v1_and_up_makes_v1_groups(host_unchanged):
    from vnetbench.topologies.thishost import cgroups, state
    from vnetbench.topologies.model import spec

    host_unchanged("2vm-1vswitch")
    shown = vnetbench("topology", "show", "2vm-1vswitch", check=0).stdout
    said = "vCPUs enforced by cgroup v1 cpuset; memory limited by cgroup v1 memory.limit_in_bytes"
    assert said in shown
    up = vnetbench("topology", "up", "2vm-1vswitch", check=0)
    assert said in up.stdout
    st = state.read(spec.load_topology("2vm-1vswitch").id)
    assert st["cgroup_mode"] == cgroups.mode()
    for vm in st["layout"]["vms"]:
        cpuset, memory = st["cgroups"]["cpuset"][vm["name"]], st["cgroups"]["memory"][vm["name"]]
        assert cpuset.startswith(str(cgroups.v1_root("cpuset")) + "/vnb-")
        assert memory.startswith(str(cgroups.v1_root("memory")) + "/vnb-")
        assert open(os.path.join(cpuset, "cpuset.cpus")).read().strip() == ",".join(map(str, vm["cpus"]))
        assert int(open(os.path.join(memory, "memory.limit_in_bytes")).read()) == vm["memory"]
    assert not cgroups.ENABLED.exists(), "v1 enables no v2 controllers"
    assert "vCPUs enforced by cgroup v1 cpuset" in vnetbench("topology", "show", "2vm-1vswitch", check=0).stdout
    vnetbench("topology", "down", "2vm-1vswitch", check=0)
    assert snapshot() == host_unchanged.before
