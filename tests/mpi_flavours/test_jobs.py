"""With each of the three MPIs: a C program and every kernel, natively and on 2vm-2vswitch, as one world of
the launched size, each rank where the topology puts it, and the record naming launcher and library."""

import json
import re
import subprocess

import pytest

from emulation.conftest import WHY_NOT, snapshot

from .conftest import FLAVOURS, LIBRARY, TINY, cli

KERNELS = list(TINY)
VMS = ["2vm-2vswitch-vm1", "2vm-2vswitch-vm2"]
VERSION = {"openmpi5": "Open MPI 5.", "openmpi4": "Open MPI 4.", "mpich": "MPICH 4."}


def ranks_said(stdout: str) -> list[tuple[int, int, str]]:
    return sorted((int(r), int(n), host) for r, n, host in re.findall(r"rank (\d+) of (\d+) on (\S+)", stdout))


@pytest.mark.timeout(120)
def test_hello_natively(flavour, python_of, hello_of):
    proc = cli(python_of("openmpi5"), "exec", "--topology", "native", "--ranks", "2", "--mpi", "auto", "--timeout", "60",
               "--", hello_of(flavour))
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = ranks_said(proc.stdout)
    assert [(rank, size) for rank, size, _ in said] == [(0, 2), (1, 2)], proc.stdout


@pytest.mark.timeout(180)
def test_every_kernel_natively(flavour, python_of, tmp_path):
    python = python_of(flavour)
    for kernel in KERNELS:
        store = tmp_path / f"{kernel}.jsonl"
        proc = cli(python, "run", kernel, "--ranks", "2", "--json", "--store", store, *TINY[kernel], timeout=150)
        record = json.loads(store.read_text().splitlines()[-1])
        assert proc.returncode == 0 and record["status"] == "ok", (kernel, proc.stderr[-2000:], record["validation"])
        assert record["ranks"] == 2 and len(record["placement"]) == 2
        assert record["launch"]["mpi"]["flavour"] == FLAVOURS[flavour][1]
        assert record["environment"]["mpi_library"].startswith(LIBRARY[flavour]), record["environment"]["mpi_library"]
        assert record["environment"]["versions"]["mpi"].startswith(VERSION[flavour])


# one bring-up for every flavour's jobs on 2vm-2vswitch; the host is compared with how it was before

@pytest.fixture(scope="module")
def two_vms():
    if WHY_NOT:
        pytest.skip(f"MPI flavours tier on VMs: {WHY_NOT}")
    import sys

    before = snapshot()
    up = cli(sys.executable, "topology", "up", "2vm-2vswitch", timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        yield "2vm-2vswitch"
    finally:
        down = cli(sys.executable, "topology", "down", "2vm-2vswitch", timeout=120)
        assert down.returncode == 0, down.stderr
        after = snapshot()
        assert after == before, "the host changed"


@pytest.mark.emulation
@pytest.mark.timeout(120)
def test_hello_in_two_vms(flavour, python_of, hello_of, two_vms):
    hello = hello_of(flavour)
    choices = ["auto", "mpich"] if flavour == "mpich" else ["auto"]
    for choice in choices:
        proc = cli(python_of("openmpi5"), "exec", "--topology", two_vms, "--ranks", "2", "--mpi", choice,
                   "--timeout", "60", "--", hello)
        assert proc.returncode == 0, (choice, proc.stderr[-2000:])
        assert ranks_said(proc.stdout) == [(0, 2, VMS[0]), (1, 2, VMS[1])], (choice, proc.stdout)


@pytest.mark.emulation
@pytest.mark.timeout(240)
def test_every_kernel_in_two_vms(flavour, python_of, two_vms, tmp_path):
    python = python_of(flavour)
    for kernel in KERNELS:
        store = tmp_path / f"{kernel}.jsonl"
        proc = cli(python, "run", kernel, "--ranks", "2", "--topology", two_vms, "--json", "--store", store,
                   *TINY[kernel], timeout=200)
        record = json.loads(store.read_text().splitlines()[-1])
        # status ok includes the ranks' own placement check: hostname, address, cpus and netns of their VM
        assert proc.returncode == 0 and record["status"] == "ok", (kernel, proc.stderr[-2000:], record["validation"])
        assert [p["hostname"] for p in record["placement"]] == VMS
        assert [p["vm"] for p in record["placement"]] == ["vm1", "vm2"]
        assert record["launch"]["mpi"]["flavour"] == FLAVOURS[flavour][1]
        assert record["environment"]["mpi_library"].startswith(LIBRARY[flavour])


@pytest.mark.timeout(120)
def test_a_sweep_runs_with_the_chosen_mpi(python_of, tmp_path):
    python = python_of("mpich")
    store = tmp_path / "sweep.jsonl"
    proc = cli(python, "sweep", "--kernel", "allreduce", "--topologies", "native", "--ranks", "2", "--repeat", "1",
               "--mpi", "mpich", "--store", store, *TINY["allreduce"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    assert record["status"] == "ok" and record["launch"]["mpi"]["runtime"] == "Hydra"
    refused = cli(python, "sweep", "--kernel", "allreduce", "--topologies", "native", "--ranks", "2",
                  "--mpi", "openmpi", "--store", tmp_path / "refused.jsonl", *TINY["allreduce"])
    assert refused.returncode == 2 and "but --mpi is Open MPI" in refused.stderr
    assert not (tmp_path / "refused.jsonl").exists()
