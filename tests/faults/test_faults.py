"""Faults injected into real runs: killed ranks, vanished links, a killed vnetbench, signals in
every window, two vnetbench processes at once, stale state. Each test checks the outcome the
issue asks for and, through ``clean_host``, that the host is as it was afterwards.

The runs are small halo exchanges (40^3 cells on 2 ranks); a fault is injected once the ranks
have told vnetbench's watch they started (their markers in the job directory), so it lands in
the middle of the computation, not during start-up.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faults.conftest import finish, records, requires_netns, start, wait_for
from harness import hoststate

pytestmark = requires_netns

JOBS = Path("/run/vnetbench/jobs")
HALO = ["--kernel", "halo", "--global", "40,40,40"]


def started_ranks() -> dict[int, dict]:
    """{rank: marker} of the ranks of the job that is running now (their start markers)."""
    found = {}
    try:  # vnetbench removes the jobs folder, and a job's, as each job ends: glob may find either gone
        markers = list(JOBS.glob("*/ranks/*.json"))
    except FileNotFoundError:
        return found
    for marker in markers:
        try:
            data = {**json.loads(marker.read_text()), "job": marker.parent.parent.name}
        except (OSError, ValueError):
            continue
        if os.path.exists(f"/proc/{data['pid']}"):  # not what a dead job left
            found[int(marker.stem)] = data
    return found


def ranks_of_new_job(seen_jobs: set, count: int = 2, in_vm: bool | None = None) -> dict[int, dict]:
    """Wait until a job not in ``seen_jobs`` (inside VMs, or not, if ``in_vm`` says) has ``count``
    ranks started; their markers."""
    def ready():
        ranks = {r: m for r, m in started_ranks().items() if m["job"] not in seen_jobs}
        if in_vm is not None:
            ranks = {r: m for r, m in ranks.items() if (m["host"] != os.uname().nodename) == in_vm}
        jobs = {m["job"] for m in ranks.values()}
        return ranks if len(ranks) >= count and len(jobs) == 1 else None

    ranks = wait_for(ready, 120, f"{count} ranks of a new job")
    seen_jobs.add(next(iter(ranks.values()))["job"])
    return ranks


def link(kind: str, index: int) -> str:
    """The name of this host's vnetbench interface of ``kind`` ('v': VM veth, 'u': uplink) and index."""
    for name in os.listdir("/sys/class/net"):
        if name.startswith("vnb") and len(name) > 8 and name[7] == kind and name[8:].rstrip("ab") == str(index):
            if kind != "u" or name.endswith("a"):
                return name
    pytest.fail(f"no vnetbench interface of kind {kind!r} and index {index}")


def by_slot(found: list[dict]) -> dict:
    return {(r["topology"]["name"], r["repetition"]): r for r in found}


# ---- 1. a rank killed mid-run ----------------------------------------------------------------

def test_a_rank_killed_natively_and_in_a_vm_fails_its_run_naming_rank_and_vm(clean_host, tmp_path):
    store = tmp_path / "store.jsonl"
    # long enough to be killed in (a rank is killed 0.2 s after its job's ranks have all started), short enough for the
    # second repetitions, which run to the end (8000 steps had them busy for seconds each, in the VMs most)
    proc = start("sweep", *HALO, "--steps", "3000", "--topologies", "native,2vm-1vswitch", "--ranks", "2",
                 "--repeat", "2", "--timeout", "120", "--store", store)
    seen, took = set(), {}
    for topology in ("native", "2vm-1vswitch"):
        # the first repetition on each; the second is left to pass
        ranks = ranks_of_new_job(seen, in_vm=topology != "native")
        time.sleep(0.2)
        before = len(records(store))
        killed = time.monotonic()
        os.kill(ranks[1]["pid"], signal.SIGKILL)
        wait_for(lambda: len(records(store)) > before, 60, f"the record of the run on {topology}")
        took[topology] = time.monotonic() - killed
    code, out, err, _ = finish(proc, 300)
    assert code == 1, err[-3000:]  # a run failed; the sweep finished
    found = by_slot(records(store))
    assert sorted(found) == [("2vm-1vswitch", 0), ("2vm-1vswitch", 1), ("native", 0), ("native", 1)]
    native, vm = found[("native", 0)], found[("2vm-1vswitch", 0)]
    for record in (native, vm):
        assert record["status"] == "failed", record["validation"]
        assert record["failure"]["cause"] == "rank" and record["failure"]["rank"] == 1
        assert record["validation"]["detail"].startswith("rank 1 on ")
    assert native["failure"]["vm"] is None and native["failure"]["host"] == os.uname().nodename
    assert vm["failure"]["vm"] == "vm2" and vm["failure"]["host"] == "2vm-1vswitch-vm2"
    assert "rank 1 on VM vm2 (2vm-1vswitch-vm2)" in vm["validation"]["detail"]
    # the sweep went on: the next repetition of each ran and passed
    for slot in (("native", 1), ("2vm-1vswitch", 1)):
        assert found[slot]["status"] == "ok", (slot, found[slot]["validation"])
    # ended by Open MPI noticing the death, not by the 120 s timeout or a TCP timeout
    assert max(took.values()) < 15, took


# ---- 2. an emulated VM's network vanishes mid-run ---------------------------------------------

@pytest.mark.parametrize("topology, breakage, vm", [
    ("2vm-1vswitch", lambda: ["ip", "link", "del", link("v", 1)], "vm2"),
    ("2vm-2vswitch", lambda: ["ip", "link", "set", link("u", 0), "down"], "vm1"),
], ids=["veth-deleted", "uplink-down"])
def test_a_vm_whose_network_vanishes_fails_its_run_and_the_sweep_rebuilds_the_topology(
        clean_host, tmp_path, topology, breakage, vm):
    store = tmp_path / "store.jsonl"
    # broken 0.2 s after its ranks have started; the second repetition, on the rebuilt topology, runs to the end
    proc = start("sweep", *HALO, "--steps", "1000", "--topologies", topology, "--ranks", "2", "--repeat", "2",
                 "--timeout", "60", "--store", store)
    ranks_of_new_job(set())
    time.sleep(0.2)
    broken = time.monotonic()
    subprocess.run(breakage(), check=True)
    wait_for(lambda: records(store), 70, "the record of the broken run")
    took = time.monotonic() - broken
    code, out, err, _ = finish(proc, 300)
    assert code == 1, err[-3000:]
    first, second = sorted(records(store), key=lambda r: r["repetition"])
    assert first["status"] == "failed", first["validation"]  # not "timeout": the watch stopped it
    assert first["failure"] == {"cause": "network", "vms": [vm], "ranks": [int(vm[-1]) - 1]}
    assert f"VM {vm}" in first["validation"]["detail"] or "uplink" in first["validation"]["detail"]
    assert took < 10, took
    assert "taking it down and bringing it up afresh" in err
    assert second["status"] == "ok", second["validation"]


# ---- 3. vnetbench itself killed mid-sweep ----------------------------------------------------

def test_a_killed_sweep_is_cleaned_up_exactly_and_resumed_without_duplicates(clean_host, tmp_path):
    store = tmp_path / "store.jsonl"
    sweep = ["sweep", *HALO, "--steps", "3000", "--topologies", "native,2vm-1vswitch", "--ranks", "2",
             "--repeat", "2", "--timeout", "120", "--store", store]
    proc = start(*sweep)
    ranks_of_new_job(set(), in_vm=True)  # the first run inside the VMs, after native's first (they alternate)
    time.sleep(0.3)
    stored = records(store)
    proc.kill()
    proc.wait(timeout=30)
    # mpirun dies with vnetbench (parent-death signal), and its ranks with it
    wait_for(lambda: not hoststate.job_processes(), 20, "the killed sweep's MPI processes to end")
    status = json.loads(subprocess.run([sys.executable, "-m", "vnetbench", "topology", "status", "--json"],
                                       capture_output=True, text=True, check=True).stdout)
    assert [row["name"] for row in status] == ["2vm-1vswitch"] and status[0]["stale"]
    assert f"by process {proc.pid}, which is gone" in status[0]["stale_reason"]
    cleanup = subprocess.run([sys.executable, "-m", "vnetbench", "topology", "cleanup"],
                             capture_output=True, text=True)
    assert cleanup.returncode == 0, cleanup.stderr
    assert "removed topology 2vm-1vswitch" in cleanup.stdout and "removed job" in cleanup.stdout
    left = hoststate.differences(clean_host, hoststate.everything())
    assert not left, f"topology cleanup left: {left}"
    assert records(store) == stored  # the run in flight left no record, not even half a line
    code, out, err, _ = finish(start(*sweep, "--resume"), 300)
    assert code == 0, err[-3000:]
    assert f"resume: {len(stored)} run(s) already in the store" in err and len(stored) == 1
    final = records(store)
    slots = [(r["topology"]["name"], r["repetition"]) for r in final]
    assert sorted(slots) == [("2vm-1vswitch", 0), ("2vm-1vswitch", 1), ("native", 0), ("native", 1)]
    assert all(r["status"] == "ok" for r in final)
    assert final[:len(stored)] == stored


# ---- 4. SIGINT and SIGTERM during bring-up, a run and teardown -------------------------------

def _topology_dirs() -> list[Path]:
    root = Path("/run/vnetbench")
    return [p for p in root.iterdir() if re.fullmatch("[0-9a-f]{4}", p.name)] if root.is_dir() else []


def _during_bringup(proc, store):
    def half_built():
        for folder in _topology_dirs():
            try:
                st = json.loads((folder / "state.json").read_text())
                if not st["complete"] and st["owner"]["pid"] == proc.pid:
                    return folder
            except (OSError, ValueError, KeyError):
                continue
        return None

    wait_for(half_built, 60, "a topology being brought up", interval=0.001)
    return "bring-up"


def _during_run(proc, store):
    ranks_of_new_job(set())
    time.sleep(0.2)
    return "run"


def _during_teardown(proc, store):
    # the record is appended before the topology is taken down: from then on it is teardown
    def stored():
        try:
            return store.stat().st_size
        except FileNotFoundError:  # not yet, or the start-up probe of the store came and went
            return 0

    wait_for(stored, 120, "the run's record", interval=0.001)
    assert any(name.startswith("vnb") for name in os.listdir("/sys/class/net")), "teardown was already over"
    return "teardown"


@pytest.mark.parametrize("window", [_during_bringup, _during_run, _during_teardown],
                         ids=["bring-up", "run", "teardown"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_in_any_window_leaves_nothing_behind(clean_host, tmp_path, window, sig):
    store = tmp_path / "store.jsonl"
    # steps to be signalled in where the window is the run; in bring-up the run never starts, and in teardown it has
    # ended (its record stored), so a few steps there (1500 across the shaped uplink kept both ranks busy for seconds)
    steps = "1500" if window is _during_run else "20"
    proc = start("run", "halo", "--global", "40,40,40", "--steps", steps, "--topology", "2vm-2vswitch",
                 "--ranks", "2", "--timeout", "60", "--store", store)
    window(proc, store)
    # as a terminal would: the signal goes to vnetbench's whole process group, more than once
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        os.killpg(proc.pid, sig)
        time.sleep(0.02)
    code, out, err, _ = finish(proc, 30)
    assert code == 128 + sig, f"exit {code}: {err[-2000:]}"
    assert "Traceback" not in err
    for record in records(store):  # whatever was stored is whole
        assert record["kernel"] == "halo"


# a SIGINT delivered at once after a step of the bring-up: the test above lands after the first state write by
# chance (its poll sees that write), and left the state folder of a topology with nothing else made, once in a
# suite. "first" and "complete": after each state write; "owned": once the run's topology object has taken its
# teardown on (bring_up and the object then both take it down, the second finding nothing); "tool": as the first
# ip of the bring-up has started, inside Popen (the test above once left the bridge that ip then made, after the
# teardown had looked)
SIGNAL_AFTER = """
import signal, subprocess, sys
from vnetbench import cli
from vnetbench.topologies.thishost import lifecycle, state

real_write, real_own, real_start = state.write, lifecycle.Owned._own, subprocess.Popen._execute_child

def write(st):
    real_write(st)
    if sys.argv[1] in ("first", "complete") and st["complete"] == (sys.argv[1] == "complete"):
        signal.raise_signal(signal.SIGINT)

def own(self, st):
    real_own(self, st)
    if sys.argv[1] == "owned":
        signal.raise_signal(signal.SIGINT)

def start(self, args, *rest):
    real_start(self, args, *rest)
    if sys.argv[1] == "tool" and list(args)[:3] == ["ip", "link", "add"]:
        signal.raise_signal(signal.SIGINT)

state.write, lifecycle.Owned._own, subprocess.Popen._execute_child = write, own, start
raise SystemExit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("after", ["first", "complete", "owned", "tool"])
def test_a_signal_right_after_a_step_of_the_bring_up_leaves_nothing(clean_host, tmp_path, after):
    store = tmp_path / "store.jsonl"
    done = subprocess.run([sys.executable, "-c", SIGNAL_AFTER, after, "run", "halo", "--global", "12,12,12",
                           "--steps", "3", "--topology", "2vm-1vswitch", "--ranks", "2", "--store", str(store)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not store.exists()  # and clean_host: no state folder, link or namespace of it is left


# ---- 5. the disk fills -----------------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "vnetbench-test-disk", disk], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", disk], check=True)


def test_a_full_disk_fails_clearly_keeping_earlier_records_whole(clean_host, tiny_disk):
    store = tiny_disk / "store.jsonl"
    earlier = Path(__file__).parents[1] / "data" / "stores" / "study.jsonl"
    store.write_bytes(earlier.read_bytes())
    before = store.read_bytes()
    # leave a page free: a record (several pages here) starts to fit, then the disk is full mid-line
    filler = tiny_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    os.truncate(filler, filler.stat().st_size - 4096)
    done = subprocess.run([sys.executable, "-m", "vnetbench", "sweep", *HALO, "--steps", "2000",
                           "--topologies", "native", "--ranks", "2", "--repeat", "3", "--store", store],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("vnetbench: error:")]
    assert errors == [f"vnetbench: error: cannot write store {store}: disk full (no space left on device); "
                      f"earlier records are intact, this one was not stored"]
    assert "Traceback" not in done.stderr
    assert store.read_bytes() == before  # not a byte of a half-written line
    # the record that did not fit is on stderr, whole, for 'vnetbench ingest' later
    lost = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert len(lost) == 1 and lost[0]["kernel"] == "halo" and lost[0]["status"] == "ok"
    # the sweep stopped at the first record it could not keep
    assert done.stderr.count("halo x2 on native (repetition") == 1
    report = subprocess.run([sys.executable, "-m", "vnetbench", "report", "--store", store],
                            capture_output=True, text=True)
    assert report.returncode == 0 and "skipped" not in report.stderr, report.stderr


# ---- 6. two vnetbench processes at once ------------------------------------------------------

def test_two_sweeps_on_different_topologies_share_one_store_without_clashing(clean_host, tmp_path):
    store = tmp_path / "store.jsonl"
    names = {}
    procs = [start("sweep", *HALO, "--steps", "100", "--topologies", topology, "--ranks", "2", "--repeat", "3",
                   "--timeout", "120", "--store", store) for topology in ("2vm-1vswitch", "2vm-2vswitch")]

    def both_up():
        states = [json.loads((d / "state.json").read_text()) for d in _topology_dirs()
                  if (d / "state.json").exists()]
        for st in states:
            names[st["name"]] = st
        return len(names) == 2

    wait_for(both_up, 120, "both topologies up at once", interval=0.01)
    for proc in procs:
        code, out, err, _ = finish(proc, 300)
        assert code == 0, err[-3000:]
    lines = store.read_text().splitlines()
    found = [json.loads(line) for line in lines]  # every line whole: none interleaved
    assert len(found) == 6 and len({r["run_id"] for r in found}) == 6
    assert sorted((r["topology"]["name"], r["repetition"]) for r in found) == \
        sorted((t, rep) for t in ("2vm-1vswitch", "2vm-2vswitch") for rep in range(3))
    one, two = names["2vm-1vswitch"], names["2vm-2vswitch"]
    assert one["id"] != two["id"] and one["layout"]["subnet"] != two["layout"]["subnet"]
    ours = {vm["netns"] for st in (one, two) for vm in st["layout"]["vms"]}
    assert len(ours) == 4


def test_a_second_run_on_a_topology_in_use_is_refused_not_clobbered(clean_host, tmp_path):
    first = start("run", "halo", "--global", "40,40,40", "--steps", "4000", "--topology", "2vm-1vswitch",
                  "--ranks", "2", "--store", tmp_path / "one.jsonl")
    ranks_of_new_job(set())
    # nor does cleanup, even --all, take it down under the run: it names the run that holds it
    cleaned = subprocess.run([sys.executable, "-m", "vnetbench", "topology", "cleanup", "--all"],
                             capture_output=True, text=True)
    assert cleaned.returncode == 0 and "removed topology 2vm-1vswitch" not in cleaned.stdout, cleaned
    assert re.search(rf"^kept topology 2vm-1vswitch \(\w{{4}}\): held by run {first.pid}; 'vnetbench topology "
                     rf"cleanup --force' takes it down", cleaned.stdout, re.M), cleaned.stdout
    second = subprocess.run([sys.executable, "-m", "vnetbench", "run", "halo", "--topology", "2vm-1vswitch",
                             "--ranks", "2", "--store", tmp_path / "two.jsonl"], capture_output=True, text=True)
    assert second.returncode == 1 and "is in use by process" in second.stderr, second.stderr
    assert not (tmp_path / "two.jsonl").exists()
    code, out, err, _ = finish(first, 120)
    assert code == 0, err[-2000:]


# ---- 7. stale state --------------------------------------------------------------------------

@pytest.mark.parametrize("window", [_during_bringup, _during_run], ids=["bring-up", "run"])
def test_a_topology_left_by_a_crash_is_reported_with_its_age_and_replaced_not_duplicated(
        clean_host, tmp_path, window):
    store = tmp_path / "store.jsonl"
    proc = start("run", "halo", "--global", "40,40,40", "--steps", "20000", "--topology", "2vm-1vswitch",
                 "--ranks", "2", "--store", store)
    window(proc, store)
    proc.kill()
    proc.wait(timeout=30)
    wait_for(lambda: not hoststate.job_processes(), 20, "the killed run's MPI processes to end")
    time.sleep(0.5)  # an ip or tc the crash interrupted has finished: what it made is in the state
    status = subprocess.run([sys.executable, "-m", "vnetbench", "topology", "status"], capture_output=True,
                            text=True)
    assert f"s ago by process {proc.pid}, which is gone" in status.stdout or \
        "left half-built" in status.stdout, status.stdout
    assert "stale" in status.stdout
    # alive while its objects are counted (at once when its ranks have started), then run to the end
    again = start("run", "halo", "--global", "40,40,40", "--steps", "500", "--topology", "2vm-1vswitch",
                  "--ranks", "2", "--store", store)
    ranks_of_new_job(set())
    # one topology, one set of objects: the stale ones were removed before new ones were made
    up = sorted(n for n in os.listdir("/sys/class/net") if n.startswith("vnb"))
    assert len(_topology_dirs()) == 1 and len(up) == 3, up  # a bridge and two VM veths
    code, out, err, _ = finish(again, 120)
    assert code == 0, err[-3000:]
    assert "; removing it and bringing it up afresh" in err and " ago " in err
    [record] = records(store)
    assert record["status"] == "ok"
