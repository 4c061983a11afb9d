"""cgroups.py's pure parts: what the record says enforced the VMs, and the file of enabled controllers.

The v2 path itself runs for real in the guest tier (tests/guest); the v1 path in the emulation tier.
"""

import json

from vnetbench.topologies.thishost import cgroups
from vnetbench.topologies.netns import view

V2 = {"cpuset": {"vm1": "/sys/fs/cgroup/vnb-abcd-vm1"}, "memory": {"vm1": "/sys/fs/cgroup/vnb-abcd-vm1"}}
V1 = {"cpuset": {"vm1": "/sys/fs/cgroup/cpuset/vnb-abcd-vm1"}, "memory": {"vm1": "/sys/fs/cgroup/memory/vnb-abcd-vm1"}}


def test_enforcement_names_the_version_and_the_file():
    assert cgroups.enforcement("v2", V2) == {"vcpus": "cgroup v2 cpuset", "memory": "cgroup v2 memory.max"}
    assert cgroups.enforcement("hybrid", V1) == {"vcpus": "cgroup v1 cpuset",
                                                 "memory": "cgroup v1 memory.limit_in_bytes"}
    assert cgroups.enforcement("v2", {"cpuset": {}, "memory": {}}) == {"vcpus": "cpu affinity", "memory": "none"}
    assert cgroups.enforcement("v1", {"cpuset": V1["cpuset"], "memory": {}}) == {"vcpus": "cgroup v1 cpuset",
                                                                                "memory": "none"}


def test_a_state_from_before_cgroup_v2_reads_as_v1():
    st = {"id": "abcd", "layout": {"subnet": "10.0.0.0/24", "head": "10.0.0.1", "vms": [], "switches": []},
          "cgroups": V1}
    assert view.describe_state(st)["enforced_by"]["vcpus"] == "cgroup v1 cpuset"
    assert view.describe_state(st)["cgroup_mode"] == "v1"


def test_v2_folders_are_listed_once():
    assert cgroups.folders(V2) == ["/sys/fs/cgroup/vnb-abcd-vm1"]
    assert cgroups.folders(V1) == [V1["cpuset"]["vm1"], V1["memory"]["vm1"]]


def test_an_edited_enabled_file_names_nothing_outside_the_hierarchy(tmp_path, monkeypatch):
    enabled = tmp_path / "enabled.json"
    monkeypatch.setattr(cgroups, "ENABLED", enabled)
    enabled.write_text(json.dumps({"/sys/fs/cgroup": ["cpuset", "memory", "pids"], "/etc": ["cpuset"],
                                   "/sys/fs/cgroup/../../etc": ["memory"], "/sys/fs/cgroup/a": "cpuset"}))
    assert cgroups._read_enabled() == {"/sys/fs/cgroup": ["cpuset", "memory"]}
    enabled.write_text("not json")
    assert cgroups._read_enabled() == {}
