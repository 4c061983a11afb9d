"""A VM's memory_policy is applied inside the emulated VM and read back by each rank."""

import pytest

from conftest import json_lines, requires_mpi, vnetbench
from emulation.conftest import requires_netns
from vnetbench.kernels.numa import NodeMap

pytestmark = [requires_netns, requires_mpi, pytest.mark.timeout(180)]

SPEC = """\
version: 1
name: memtest
backend: netns
switches:
- name: sw
vms:
- name: vm1
  vcpus: 1
  memory: 512MiB
  switch: sw
  memory_policy: local
- name: vm2
  vcpus: 1
  memory: 512MiB
  switch: sw
  memory_policy: interleave
"""


def test_vm_memory_policies_are_applied_per_vm(host_unchanged, tmp_path):
    spec = tmp_path / "memtest.yaml"
    spec.write_text(SPEC)
    host_unchanged(str(spec))
    store = tmp_path / "s.jsonl"
    args = ["run", "allreduce", "--topology", spec, "--ranks", 2, "--max-size", 64, "--iterations", 10,
            "--store", store, "--json"]
    if NodeMap.read().single:
        refused = vnetbench(*args, timeout=60)
        assert refused.returncode == 2
        assert "vms[vm2].memory_policy: interleave needs 2 or more NUMA nodes" in refused.stderr
        assert not store.exists()
        args.append("--allow-single-node")
    proc = vnetbench(*args, timeout=150, check=0)
    (record,) = json_lines(proc.stdout)
    by_vm = {p["vm"]: p for p in record["placement"]}
    assert by_vm["vm1"]["memory"]["requested"] == "local"
    assert by_vm["vm1"]["memory"]["kernel_policy"]["mode"] == "bind"
    assert by_vm["vm2"]["memory"]["requested"] == "interleave"
    assert by_vm["vm2"]["memory"]["kernel_policy"]["mode"] == "interleave"
    assert by_vm["vm2"]["hostname"] == "memtest-vm2"
