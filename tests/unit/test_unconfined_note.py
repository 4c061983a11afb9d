"""A VM that cgroups did not confine (no cpuset: cpu affinity only; no memory cap) is named above
report's tables: a cell cannot show it, and its overhead means less than a confined VM's."""

import json
import sys
from pathlib import Path

from conftest import vnetbench

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402


def confined_by(records, vcpus: str, memory: str):
    for record in records:
        record["topology"]["backend"] = "netns"
        record["launch"]["notes"].update(vcpus_enforced_by=vcpus, memory_limited_by=memory)
    return records


def test_report_names_the_topologies_whose_vms_cgroups_did_not_confine(tmp_path):
    store = tmp_path / "results.jsonl"
    craft.write(store, craft.halo("native", 2, [1.0, 1.0])
                + confined_by(craft.halo("2vm-1vswitch", 2, [1.1, 1.1]), "cgroup v2 cpuset", "cgroup v2 memory.max")
                + confined_by(craft.halo("2vm-2vswitch", 2, [1.3, 1.3]), "cpu affinity", "none")
                + confined_by(craft.halo("4vm-4vswitch", 2, [1.4, 1.4]), "cgroup v1 cpuset", "none"))
    text = vnetbench("report", "--store", store, check=0).stdout
    lines = [line for line in text.splitlines() if "not confined by cgroups" in line]
    assert lines == ["VMs not confined by cgroups: 2vm-2vswitch: memory not limited; vCPUs held by cpu affinity only",
                     "VMs not confined by cgroups: 4vm-4vswitch: memory not limited"], text
    data = json.loads(vnetbench("report", "--store", store, "--format", "json", check=0).stdout)
    assert data["unconfined"] == ["2vm-2vswitch: memory not limited; vCPUs held by cpu affinity only",
                                  "4vm-4vswitch: memory not limited"]


def test_confined_vms_and_other_backends_get_no_note(tmp_path):
    store = tmp_path / "results.jsonl"
    failed = confined_by([craft.record("halo", "2vm-2vswitch", 2, 9, {}, status="failed")], "cpu affinity", "none")
    craft.write(store, craft.halo("native", 2, [1.0, 1.0]) + failed
                + confined_by(craft.halo("2vm-1vswitch", 2, [1.1, 1.1]), "cgroup v1 cpuset",
                              "cgroup v1 memory.limit_in_bytes"))
    text = vnetbench("report", "--store", store, check=0).stdout
    assert "not confined" not in text, text  # a failed run measured nothing, so it qualifies no cell
