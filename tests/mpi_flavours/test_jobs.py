"""With each of the three MPIs, through the one mpi4py wheel: a C program and every kernel natively, the C program
and two kernels on 2vm-2vswitch, as one world of the launched size, each rank where the topology puts it, the
record naming the launcher and the library the ranks loaded; and an installation whose library is another MPI's
fails the run, naming both, before any rank joins a world."""

import json
import os
import re
import subprocess
import sys

import pytest

from emulation.conftest import WHY_NOT, snapshot
from harness import listeners

from .conftest import FLAVOURS, LIBRARY, LIBRARY_FILE, TINY, VERSION, WRONG, cli, launcher_of

KERNELS = list(TINY)
# on 2vm-2vswitch, what a VM adds to the library's choice (each rank's environment through its namespace, the
# library found again there) is the same for every kernel, and every kernel ran natively with each library: a
# kernel compiled with numba (pingpong: its cache is per ABI) and one in numpy alone (allreduce, a collective)
VM_KERNELS = ["pingpong", "allreduce"]
VMS = ["2vm-2vswitch-vm1", "2vm-2vswitch-vm2"]
# where each launcher listens, seen with ss during a run: on every interface, whatever vnetbench asks (PRRTE's and
# ORTE's prte/oob_tcp_if_include, Hydra's -localhost choose only the address they announce); the record says so
LAUNCHER_WILDCARDS = {"openmpi5": {"0.0.0.0", "::"}, "openmpi4": {"0.0.0.0", "::"}, "mpich": {"0.0.0.0"}}
LOOPBACK = ("127.0.0.1", "::1")


def run_watched(*args, timeout: float):
    """``cli`` with the listeners its processes open in this network namespace (tests/harness/listeners.py)."""
    env = {k: v for k, v in os.environ.items() if k != "VNETBENCH_MPI"}
    return listeners.watch([sys.executable, "-m", "vnetbench", *map(str, args)], timeout, env=env)


def assert_listens_as_recorded(seen: list, record: dict, flavour: str, ranks_here: bool) -> None:
    """The launcher listens where the record says (every interface: pinned per flavour, so that an MPI that
    learns to bind is noticed), otherwise on loopback only; ranks on this host listen on loopback alone, and
    ranks in VMs not at all in the host's namespace."""
    shown = sorted(f"{l.address}:{l.port} {sorted(l.holders)}" for l in seen)
    launcher = [l for l in seen if not l.ranks_only]
    assert {l.address for l in launcher if l.wildcard} == LAUNCHER_WILDCARDS[flavour], shown
    assert all(l.address in LOOPBACK for l in launcher if not l.wildcard), shown
    listens = record["launch"]["mpi"]["listens"]
    assert listens.startswith("all interfaces (") and "a limitation of" in listens, listens
    ranks = [l for l in seen if l.ranks_only]
    assert all(l.address in LOOPBACK for l in ranks) if ranks_here else not ranks, shown


def ranks_said(stdout: str) -> list[tuple[int, int, str]]:
    return sorted((int(r), int(n), host) for r, n, host in re.findall(r"rank (\d+) of (\d+) on (\S+)", stdout))


def last_record(store) -> dict:
    return json.loads(store.read_text().splitlines()[-1])


def assert_names_its_library(record: dict, flavour: str, launcher: str) -> None:
    """The record says which library the ranks loaded (launch.mpi.library) and how it was chosen."""
    mpi = record["launch"]["mpi"]
    assert mpi["flavour"] == FLAVOURS[flavour][1] and mpi["launcher"] == os.path.abspath(launcher)
    library = mpi["library"]
    assert library["path"] == os.path.realpath(LIBRARY_FILE[flavour]), library
    assert library["family"] == mpi["family"] and library["version"] == mpi["version"], library
    assert library["chosen_by"] == f"--mpi {launcher}", library
    assert record["environment"]["mpi_library"].startswith(LIBRARY[flavour]), record["environment"]["mpi_library"]
    assert record["environment"]["versions"]["mpi"] == f"{library['product']} {library['version']}"
    assert record["environment"]["versions"]["mpi"].startswith(VERSION[flavour])


def assert_fails_naming_both(proc, record: dict, flavour: str, launcher: str) -> None:
    """One line naming what the ranks loaded and what --mpi named; nothing measured."""
    loaded = WRONG[flavour][2]
    named = {"openmpi5": "Open MPI 5.", "openmpi4": "Open MPI 4.", "mpich": "MPICH 4."}[flavour]
    assert proc.returncode == 1, proc.stderr[-2000:]
    detail = record["validation"]["detail"]
    assert record["status"] == "failed" and record["metrics"] == {} and "\n" not in detail, record["validation"]
    prefix = os.path.dirname(os.path.dirname(launcher))
    assert re.fullmatch(rf"MPI library: the ranks loaded {re.escape(loaded)}[0-9.]+ \(.+\) but --mpi named "
                        rf"{re.escape(named)}[0-9.]+ \({re.escape(launcher)}, library from prefix "
                        rf"{re.escape(prefix)}\)", detail), detail
    assert f"failed: {detail}" in proc.stderr


@pytest.mark.timeout(120)
def test_hello_natively(flavour, hello_of):
    proc = cli(sys.executable, "exec", "--topology", "native", "--ranks", "2", "--mpi", "auto", "--timeout", "60",
               "--", hello_of(flavour))
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = ranks_said(proc.stdout)
    assert [(rank, size) for rank, size, _ in said] == [(0, 2), (1, 2)], proc.stdout


# pingpong and halo run profiled (the interposer preloaded, one build for every MPI): their messages are known
# exactly from their parameters (tests/mpi_flavours/profiles.py); halo keeps a trace, read back here
PROFILED = {"pingpong": ["--profile"], "halo": ["--profile", "trace"]}


@pytest.mark.timeout(180)
def test_every_kernel_natively(flavour, tmp_path):
    from .profiles import assert_halo_profile, assert_pingpong_profile

    launcher = launcher_of(flavour)
    for kernel in KERNELS:
        store = tmp_path / f"{kernel}.jsonl"
        args = ["run", kernel, "--ranks", "2", "--mpi", launcher, "--json", "--store", store, *TINY[kernel],
                *PROFILED.get(kernel, [])]
        if kernel == KERNELS[0]:  # and where its processes listen, seen as ss sees them
            proc, seen = run_watched(*args, timeout=150)
        else:
            proc = cli(sys.executable, *args, timeout=150)
        record = last_record(store)
        assert proc.returncode == 0 and record["status"] == "ok", (kernel, proc.stderr[-2000:], record["validation"])
        assert record["ranks"] == 2 and len(record["placement"]) == 2
        assert_names_its_library(record, flavour, launcher)
        if kernel == KERNELS[0]:
            assert_listens_as_recorded(seen, record, flavour, ranks_here=True)
        if kernel == "pingpong":
            assert_pingpong_profile(record, TINY[kernel], LIBRARY[flavour])
        if kernel == "halo":
            assert_halo_profile(record, TINY[kernel], LIBRARY[flavour], store)


# md with PME: its transposes and grid halo are Alltoallv of numpy buffers, a collective the other kernels do not use
MD_PME = ["--cells", "7", "--steps", "10", "--rebuild-every", "5", "--thermo-every", "10", "--electrostatics", "pme",
          "--pme-spacing", "0.5"]


@pytest.mark.timeout(120)
def test_md_with_pme_natively(flavour, tmp_path):
    launcher = launcher_of(flavour)
    store = tmp_path / "md.jsonl"
    proc = cli(sys.executable, "run", "md", "--ranks", "2", "--mpi", launcher, "--json", "--store", store, *MD_PME,
               timeout=100)
    record = last_record(store)
    assert proc.returncode == 0 and record["status"] == "ok", (proc.stderr[-2000:], record["validation"])
    m = record["metrics"]
    assert m["pme_evaluations"] == 10 and m["pme_transpose_bytes"] > 0 and m["pme_halo_bytes"] > 0
    # the perfect lattice's Coulomb energy per atom, -0.671225 (md at a 90^3 grid, and LAMMPS), within this grid's error
    assert m["thermo"][0]["coul"] == pytest.approx(-0.671225, rel=1.5e-2)
    assert_names_its_library(record, flavour, launcher)


@pytest.mark.timeout(120)
def test_a_library_that_is_not_the_one_named_fails_the_run(flavour, wrong_install, tmp_path):
    launcher = wrong_install(flavour)
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "run", "allreduce", "--ranks", "2", "--mpi", launcher, "--store", store,
               *TINY["allreduce"], timeout=100)
    assert_fails_naming_both(proc, last_record(store), flavour, launcher)


# one bring-up for every flavour's jobs on 2vm-2vswitch; the host is compared with how it was before

@pytest.fixture(scope="module")
def two_vms():
    if WHY_NOT:
        pytest.skip(f"MPI flavours tier on VMs: {WHY_NOT}")
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


@pytest.mark.timeout(120)
def test_hello_in_two_vms(flavour, hello_of, two_vms):
    hello = hello_of(flavour)
    choices = ["auto", "mpich"] if flavour == "mpich" else ["auto"]
    for choice in choices:
        proc = cli(sys.executable, "exec", "--topology", two_vms, "--ranks", "2", "--mpi", choice,
                   "--timeout", "60", "--", hello)
        assert proc.returncode == 0, (choice, proc.stderr[-2000:])
        assert ranks_said(proc.stdout) == [(0, 2, VMS[0]), (1, 2, VMS[1])], (choice, proc.stdout)


@pytest.mark.timeout(240)
def test_kernels_in_two_vms(flavour, two_vms, tmp_path):
    launcher = launcher_of(flavour)
    for kernel in VM_KERNELS:
        store = tmp_path / f"{kernel}.jsonl"
        args = ["run", kernel, "--ranks", "2", "--topology", two_vms, "--mpi", launcher, "--json", "--store", store,
                *TINY[kernel]]
        if kernel == VM_KERNELS[0]:  # and where its processes listen, seen as ss sees them
            proc, seen = run_watched(*args, timeout=200)
        else:
            proc = cli(sys.executable, *args, timeout=200)
        record = last_record(store)
        # status ok includes the ranks' own placement check: hostname, address, cpus and netns of their VM
        assert proc.returncode == 0 and record["status"] == "ok", (kernel, proc.stderr[-2000:], record["validation"])
        assert [p["hostname"] for p in record["placement"]] == VMS
        assert [p["vm"] for p in record["placement"]] == ["vm1", "vm2"]
        assert_names_its_library(record, flavour, launcher)
        if kernel == VM_KERNELS[0]:
            assert_listens_as_recorded(seen, record, flavour, ranks_here=False)


@pytest.mark.timeout(120)
def test_a_library_that_is_not_the_one_named_fails_the_run_in_two_vms(flavour, wrong_install, two_vms, tmp_path):
    launcher = wrong_install(flavour)
    store = tmp_path / "s.jsonl"
    proc = cli(sys.executable, "run", "allreduce", "--ranks", "2", "--topology", two_vms, "--mpi", launcher,
               "--store", store, *TINY["allreduce"], timeout=100)
    assert_fails_naming_both(proc, last_record(store), flavour, launcher)


@pytest.mark.timeout(120)
def test_a_sweep_runs_with_the_chosen_mpi(tmp_path):
    launcher_of("mpich")
    store = tmp_path / "sweep.jsonl"
    proc = cli(sys.executable, "sweep", "--kernel", "allreduce", "--topologies", "native", "--ranks", "2",
               "--repeat", "1", "--mpi", "mpich", "--store", store, *TINY["allreduce"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    assert record["status"] == "ok" and record["launch"]["mpi"]["runtime"] == "Hydra"
    assert record["launch"]["mpi"]["library"]["chosen_by"] == "--mpi mpich"
    assert record["environment"]["versions"]["mpi"].startswith("MPICH 4.")


@pytest.mark.timeout(180)
def test_two_abis_compiling_pingpong_at_once_keep_apart_in_numbas_cache(tmp_path):
    """pingpong's compiled loop differs by MPI ABI (MPICH's handles are ints, Open MPI's pointers). Runs of
    both compiling it at once into one cold cache (two MPIs' sweeps on one checkout or home) each get a cache
    index of their own, with one data file each: sharing one index, both named data file 1 and one ABI's entry
    could point at the other's code. Each ABI's next run, on what is cached, is still ok."""
    launchers = {flavour: launcher_of(flavour) for flavour in ("mpich", "openmpi5")}
    cache = tmp_path / "numba-cache"
    env = {**{k: v for k, v in os.environ.items() if k != "VNETBENCH_MPI"}, "NUMBA_CACHE_DIR": str(cache)}

    def start(flavour, store):
        return subprocess.Popen([sys.executable, "-m", "vnetbench", "run", "pingpong", "--ranks", "2", "--mpi",
                                 launchers[flavour], "--store", str(store), *TINY["pingpong"]],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)

    for round_ in ("cold, at once", "warm"):
        runs = {flavour: (start(flavour, tmp_path / f"{flavour}.jsonl"), tmp_path / f"{flavour}.jsonl")
                for flavour in launchers}
        try:
            for flavour, (proc, store) in runs.items():
                _, err = proc.communicate(timeout=150)
                record = last_record(store)
                assert proc.returncode == 0 and record["status"] == "ok", (round_, flavour, err[-2000:])
                assert record["metrics"]["latency_loop"] == "compiled", (round_, flavour, record["metrics"])
        finally:
            for proc, _ in runs.values():
                if proc.poll() is None:  # vnetbench ends its job's ranks when it is ended
                    proc.terminate()
                    proc.wait(60)
    for loop in ("ping", "pong"):
        indexes = sorted(path.name for path in cache.rglob(f"*.{loop}_*.nbi"))
        assert len(indexes) == 2, indexes  # one per ABI
        for index in indexes:
            data = list(cache.rglob(index.removesuffix(".nbi") + ".*.nbc"))
            assert len(data) == 1, (index, data)
