"""Overhead N/A from real records: halo on the 1vm preset (scaled to this host) beside native.

On a 2-cpu host the scaled 1vm has 1 vCPU, so 2 ranks oversubscribe it while native runs them on
2 cores: the study marked such cells N/A, and so must report. On a larger host the VM may fit;
the test then checks that the cell is compared.
"""

import json

import pytest

from conftest import requires_mpi, vnetbench
from emulation.conftest import requires_netns

pytestmark = [requires_netns, requires_mpi, pytest.mark.timeout(180)]

SMALL = ["--global", "16,16,16", "--steps", "5"]


def test_oversubscribed_vm_cell_from_a_real_run_is_na(host_unchanged, store):
    vnetbench("run", "halo", "--ranks", 2, "--store", store, *SMALL, check=0)
    vnetbench("run", "halo", "--ranks", 2, "--topology", "1vm", "--store", store, *SMALL, check=0)
    records = [json.loads(line) for line in store.read_text().splitlines()]
    vm_record = next(r for r in records if r["topology"]["name"] == "1vm")
    vcpus = {len(p["vm_cpus"]) for p in vm_record["placement"]}
    crowded = min(vcpus) < 2
    assert vm_record["launch"]["notes"]["oversubscribed"] is crowded  # the launcher's note agrees
    data = json.loads(vnetbench("report", "--store", store, "--format", "json", check=0).stdout)
    (table,) = data["tables"]
    (vm,) = [row for row in table["rows"] if row["topology"] == "1vm"]
    (vm_cell,) = vm["cells"]
    if crowded:
        assert vm_cell["overhead_pct"] is None
        assert vm_cell["overhead_na"] == f"oversubscribed: 2 ranks on {min(vcpus)} vCPU in VM vm1"
        text = vnetbench("report", "--store", store, check=0).stdout
        assert "overhead N/A for 1vm x2" in text
    else:
        assert vm_cell["overhead_na"] is None and vm_cell["overhead_pct"] is not None
