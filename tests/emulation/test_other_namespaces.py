"""What another mount namespace runs is not ours: a guest or a job whose marker names /run/vnetbench/...
there (a sandbox, a container, the test suite's second lane) has a state directory of its own, and
cleanup on this host must neither count nor end it."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from emulation.conftest import requires_netns

pytestmark = [requires_netns, pytest.mark.timeout(60)]

MARKED = "VNETBENCH_QEMU_GUEST=/run/vnetbench/abcd/vm1"


def sleeper(private_run: bool) -> subprocess.Popen:
    """``sleep`` carrying a guest's marker, in a mount namespace of its own with (or without) a private
    /run/vnetbench."""
    setup = "mkdir -p /run/vnetbench && mount -t tmpfs vnbtest /run/vnetbench && " if private_run else ""
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                             setup + f"exec env {MARKED} sleep 60"], stdin=subprocess.DEVNULL)


def wait_marked(proc: subprocess.Popen) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for pid in [proc.pid, *map(int, Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split())]:
            try:
                if MARKED.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    return pid
            except OSError:
                pass
        time.sleep(0.05)
    raise AssertionError("the marked process did not start")


@pytest.mark.parametrize("private_run", [True, False], ids=["private-run", "same-run"])
def test_a_guest_of_another_mount_namespace_is_ours_only_when_it_sees_our_state_root(private_run):
    from vnetbench.core import procs
    from vnetbench.topologies.thishost import state
    from vnetbench.topologies.qemu import guests

    created = not state.RUN_DIR.exists()
    state.RUN_DIR.mkdir(exist_ok=True)
    proc = sleeper(private_run)
    try:
        pid = wait_marked(proc)
        assert os.stat(f"/proc/{pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
        assert procs.sees_as_we_do(pid, state.RUN_DIR) is not private_run
        found = guests.processes(unknown=set())  # orphans: guests of no topology that is up
        assert (pid in found) is not private_run, found
    finally:
        proc.kill()
        proc.wait()
        if created:
            try:
                state.RUN_DIR.rmdir()
            except OSError:
                pass


def test_a_vm_cgroup_whose_processes_see_another_state_root_is_not_an_orphan():
    """cgroups are the host's: a VM folder (vnb-ID-vm) whose process lives in a mount namespace with its
    own /run/vnetbench is that namespace's topology; cleanup here neither ends the process nor removes it."""
    from vnetbench.topologies.thishost import cgroups, state
    from vnetbench.topologies.netns import life

    found, planned = cgroups.plan({"vm1": "vnb-abcd-vm1"})
    folders = cgroups.folders(planned)
    if not folders:
        pytest.skip(f"no cgroup hierarchy to confine VMs in here ({found})")
    cgroups.create(found, planned, "vm1", "0", "0", 256 << 20)
    proc = sleeper(private_run=True)
    try:
        pid = wait_marked(proc)
        for folder in folders:
            Path(folder, "cgroup.procs").write_text(str(pid))
        assert not [line for line in life.cleanup() if "vnb-abcd" in line]
        assert proc.poll() is None and all(os.path.isdir(folder) for folder in folders)
        assert all(pid in cgroups.pids(folder) for folder in folders)
    finally:
        proc.kill()
        proc.wait()
        cgroups.release(found, planned)
    assert not any(os.path.exists(folder) for folder in folders)
