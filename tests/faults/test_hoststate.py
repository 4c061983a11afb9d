"""The host-state check judges only what the test and vnetbench made, both ways (tests/harness/hoststate.py).

A neighbour - another program on the machine, started outside the test (no mark, not its child) - makes and
removes its own files in /tmp, a network namespace, a veth pair, an MPI job and a QEMU while a real run goes on
inside a ``Watch``: the check finds nothing, and afterwards every one of the neighbour's objects is still there.
Leaks of the kinds vnetbench could make (a process of the test's, a file in its TMPDIR or under vnetbench's name
in /tmp, a link with vnetbench's name) are still found, and ``remove`` ends exactly those.
"""

import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import vnetbench
from faults.conftest import requires_netns, wait_for
from harness import hoststate
from vnetbench.core.procs import kill_session
from vnetbench.mpi import mpirun, run_env

SHORT_PINGPONG = ["--max-size", "64", "--iterations", "10", "--warmup", "2", "--large-iterations", "2",
                  "--large-warmup", "2", "--bw-iterations", "2", "--window", "2"]

# the neighbour: forks away from the test (its own session, reparented to init), then makes its objects, removes
# the file it had before, and sleeps until killed. Its processes carry no mark: it is another program.
NEIGHBOUR = r"""
import os, subprocess, sys, time
tag, old, mpirun, qemu, ready = sys.argv[1:6]
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
run = lambda *argv: subprocess.run(argv, check=True, capture_output=True)
open(f"/tmp/{tag}-file", "w").write("the neighbour's")
os.mkdir(f"/tmp/{tag}-dir")
os.unlink(old)
run("ip", "netns", "add", f"{tag}-ns")
run("ip", "link", "add", f"{tag}a", "type", "veth", "peer", "name", f"{tag}b")
# its mpirun's session folder (ompi.PID) in the neighbour's own folder: killed, it leaves it behind
children = [subprocess.Popen([mpirun, "--allow-run-as-root", "-n", "1", "sleep", "600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "TMPDIR": f"/tmp/{tag}-dir"})]
if qemu:
    children.append(subprocess.Popen([qemu, "-machine", "none", "-nodefaults", "-display", "none",
                                      "-monitor", "none", "-serial", "none"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
open(ready, "w").write(" ".join(str(c.pid) for c in children))
time.sleep(600)
"""


def _without_mark() -> dict:
    env = {key: value for key, value in os.environ.items() if key != hoststate.MARK}
    env.pop("TMPDIR", None)
    return env


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@requires_netns
def test_a_neighbours_files_links_mpi_job_and_vm_neither_fail_the_check_nor_are_touched(tmp_path):
    tag = f"nbr{secrets.token_hex(3)}"
    old, ready = Path(f"/tmp/{tag}-old"), tmp_path / "ready"
    old.write_text("the neighbour's, from before the test")
    qemu = shutil.which("qemu-system-x86_64") or ""
    pids = []
    try:
        with hoststate.Watch() as watch:
            subprocess.run([sys.executable, "-c", NEIGHBOUR, tag, str(old), str(mpirun()), qemu, str(ready)],
                           env=_without_mark(), check=True, timeout=30)
            wait_for(ready.exists, 30, "the neighbour's objects")
            pids = [int(pid) for pid in wait_for(lambda: ready.read_text().split(), 5, "the neighbour's pids")]
            # a real run of the test's beside it, which leaves nothing of its own
            vnetbench("run", "pingpong", "--topology", "2vm-1vswitch", "--ranks", "2", *SHORT_PINGPONG,
                      "--store", tmp_path / "store.jsonl", check=0, env=run_env())
            left = watch.leftovers()
            watch.remove(left)
        assert left == {}, f"the neighbour's objects were judged as the test's: {left}"
        # and nothing of the neighbour's was removed or ended
        assert Path(f"/tmp/{tag}-file").is_file() and Path(f"/tmp/{tag}-dir").is_dir()
        assert f"{tag}-ns" in os.listdir("/run/netns")
        assert Path(f"/sys/class/net/{tag}a").exists() and Path(f"/sys/class/net/{tag}b").exists()
        assert all(_alive(pid) for pid in pids), "the neighbour's mpirun or QEMU was ended"
        assert len(pids) == (2 if qemu else 1)
    finally:
        # the neighbour's whole session: it, its mpirun, its rank (sleep) and its QEMU
        sessions = set()
        for pid in pids:
            try:
                sessions.add(os.getsid(pid))
            except ProcessLookupError:
                pass
        for sid in sessions:
            kill_session(sid, grace=0)
        subprocess.run(["pkill", "-KILL", "-f", f"-c .*{tag}"], capture_output=True)
        subprocess.run(["ip", "netns", "del", f"{tag}-ns"], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{tag}a"], capture_output=True)
        for path in (Path(f"/tmp/{tag}-file"), old):
            path.unlink(missing_ok=True)
        shutil.rmtree(f"/tmp/{tag}-dir", ignore_errors=True)


@requires_netns
def test_leaks_of_the_tests_and_vnetbenchs_are_still_found_and_exactly_they_removed():
    link, temp = f"vnb{secrets.token_hex(2)}s", Path(f"/tmp/vnetbench-leak-{secrets.token_hex(3)}")
    job = None
    try:
        with hoststate.Watch() as watch:
            # an MPI job the test started and lost (its own session, as vnetbench starts mpirun)
            job = subprocess.Popen([str(mpirun()), "--allow-run-as-root", "-n", "1", "sleep", "600"],
                                   env=run_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            session = Path(os.environ["TMPDIR"]) / "prte.leaked"  # as an MPI's session folder in its TMPDIR
            session.mkdir()
            temp.write_text("left by vnetbench")
            subprocess.run(["ip", "link", "add", link, "type", "bridge"], check=True)
            wait_for(lambda: any(line.split()[0] == str(job.pid) for line in hoststate.job_processes()), 10,
                     "the test's mpirun to be seen as the test's")
            left = watch.leftovers(timeout=1)
            watch.remove(left)
            assert watch.leftovers(timeout=10) == {}, "remove left some of it"
        assert f"{job.pid} " in " ".join(left["processes"]["new"])
        assert any(line.split(maxsplit=1)[1] == "sleep 600" for line in left["processes"]["new"])  # its rank too
        # (with the killed mpirun's own session folder in the TMPDIR, ompi.PID: the test's too)
        assert {str(session), str(temp)} <= set(left["temp_files"]["new"])
        assert link in str(left["interfaces"]["new"])
        job.wait(timeout=10)  # (reaped by remove already: its status is gone with it)
        assert not Path(f"/proc/{job.pid}").exists() and not temp.exists()
        assert not Path(f"/sys/class/net/{link}").exists()
    finally:
        subprocess.run(["ip", "link", "del", link], capture_output=True)
        temp.unlink(missing_ok=True)
        if job is not None:
            kill_session(job.pid, grace=0)  # its rank (sleep) too, in the session it leads
            job.poll()
