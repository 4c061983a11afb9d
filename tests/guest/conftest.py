"""The guest tier: one virtme-ng guest (Debian's kernel under QEMU, this machine's filesystem as
its root) for the whole tier, because this host is cgroup v1 without tc netem and the guest is
cgroup v2 with it.

The ``guest`` session fixture boots it once with tests/guest/inside.py as its only command; that
script drives vnetbench's CLI in the guest and writes what it saw (facts.json) into a directory
shared read-write with the host (vng --rwdir); the tests assert on those facts. KVM hangs on this
machine (DESIGN.md, facts), so QEMU always runs with TCG (--disable-kvm): slow but real, so the
guest is used for behaviour, never for timings. The tier skips, with the reason and the guest's
last output lines, where vng, QEMU, busybox (virtme-ng's initramfs) or a kernel image is missing or
the guest does not boot; the guest is killed whatever happens (its own process group).

inside.py and everything it starts import from a cached 9p export of the root (cached-root.sh, through the
qemu backend's own, as its guest.sh does): 79 s alone against 93 s on virtme-ng's uncached root. It had been
withdrawn after the guest once hung busy with it; the same hang (the in-guest exec never bringing its topology
up) has since been seen on the uncached root, so the cache is not its cause, and inside.py's watch of the
guest's processes is what will show where it waits.
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CACHED_TAG = "vnbtestroot"
BOOT_TIMEOUT = 560  # the whole guest run; a quiet machine needs about 150 s, a loaded one twice that


def _vng() -> str | None:
    beside = Path(sys.executable).parent / "vng"  # the venv's, from the test extra
    return str(beside) if beside.exists() else shutil.which("vng")


def _kernel() -> str | None:
    found = sorted(glob.glob("/boot/vmlinuz-*-amd64"))
    return found[-1] if found else None


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root (the guest runs as the same user, and netns topologies need root)"
    if not _vng():
        return "needs virtme-ng (vng): pip install -e .[test]"
    if not shutil.which("qemu-system-x86_64"):
        return "needs QEMU (apt-get install qemu-system-x86)"
    if not shutil.which("busybox"):
        return "needs busybox for virtme-ng's initramfs (apt-get install busybox-static)"
    if not _kernel():
        return "needs a kernel image /boot/vmlinuz-*-amd64 (apt-get install linux-image-amd64)"
    return None


def _kill_group(proc: subprocess.Popen) -> None:
    """QEMU and vng's helpers are in the guest run's own session: end all of them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_for_facts(proc: subprocess.Popen, facts_file: Path, deadline: float) -> None:
    """Until the guest has ended, or inside.py has written its last facts ("done"), or the deadline: the guest
    is not waited for to power off (about 10 s of its emulated CPU's time, which the tier checks nothing of)."""
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if json.loads(facts_file.read_text()).get("done"):
                return
        except (OSError, ValueError):  # not written yet (inside.py replaces it whole: never half a file)
            pass
        time.sleep(0.5)


@pytest.fixture(scope="session")
def guest():
    """The facts inside.py wrote in the guest (dict); the tier skips when the guest did not boot."""
    reason = why_not()
    if reason:
        pytest.skip(f"guest tier: {reason}")
    shared = Path(tempfile.mkdtemp(prefix="vnb-guest-"))
    bindir = str(Path(sys.executable).parent)
    # the world-size shim the in-guest ``exec --record`` preloads, built here from the same source with the same
    # compiler and libraries (the guest's root is this machine's): inside.py puts it in the guest's cache, where
    # the guest would otherwise compile it under TCG (about 9 s of its CPU, which the tier checks nothing of)
    from vnetbench.apps import worldsize

    worldsize.build_guard(cache=shared / "cache")
    from vnetbench.topologies.qemu.guests import (TCG_KERNEL_OPTIONS, TCG_QEMU_OPTIONS, UNUSED_MODULES,
                                                  cached_root_export)

    # the drivers the qemu backend's guests go without (they cost seconds of a boot under TCG), and its kernel
    # options under TCG (no zeroing of every page allocated, for the emulated CPU to do) and its QEMU options under
    # TCG (virtqueue kicks handled in the vCPU thread, without an ioeventfd waking the main loop); --force-9p: the
    # root virtme-ng ends up with here anyway, which it otherwise gives only after starting QEMU 7.2's C virtiofsd
    # and waiting about 3 s for that one's socket
    # one host thread runs both vCPUs (QEMU's round-robin TCG, not a thread a vCPU): the suite's other lane keeps
    # this machine's two cores busy, and with a thread a vCPU the guest's kernel can spin on one vCPU for a lock or
    # an IPI answer of the other's while the host has that one's thread off its core (no paravirtual spinlocks
    # under TCG). Under two busy loops beside it the tier took 124 s and 126 CPU-s with a thread a vCPU, 87 s and
    # 85 CPU-s so; the guest still has two CPUs, for its two VMs' cpusets
    argv = [_vng(), "--run", _kernel(), "--disable-kvm", "--force-9p", "--memory", "2G", "--cpus", "2",
            "--qemu-opts=-accel", "--qemu-opts=tcg,thread=single",
            "--append", " ".join([f"modprobe.blacklist={','.join(UNUSED_MODULES)}", *TCG_KERNEL_OPTIONS]),
            f"--rwdir={shared}", "--cwd", str(HERE.parent.parent),
            "--exec", f"/bin/sh {HERE / 'cached-root.sh'} {CACHED_TAG} {sys.executable} {HERE / 'inside.py'} {shared}",
            # the root again, read-only, for cached-root.sh to mount with a cache, as the qemu backend exports it
            *(f"--qemu-opts={word}" for word in (*cached_root_export(CACHED_TAG), *TCG_QEMU_OPTIONS))]
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}  # vng runs virtme-run by name
    log = shared / "console.log"
    started = time.monotonic()
    try:
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True)
            try:
                _wait_for_facts(proc, shared / "facts.json", started + BOOT_TIMEOUT)
            finally:
                _kill_group(proc)
        seconds = time.monotonic() - started
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        facts_file = shared / "facts.json"
        if not facts_file.exists():
            # inside.py writes facts.json as its first act: without it the guest did not boot (TCG, QEMU, kernel)
            pytest.skip(f"guest tier: the guest did not boot or could not start inside.py within {BOOT_TIMEOUT} s "
                        f"(vng exited {proc.returncode}); its last lines:\n{tail}")
        facts = json.loads(facts_file.read_text())
        facts["host"] = {"seconds": round(seconds, 1), "console_tail": tail, "returncode": proc.returncode}
        # shown with -s: where the tier's time goes (TCG; disturbed by whatever else the machine runs)
        print(f"\nguest tier: {seconds:.0f} s in all; the guest booted in {facts.get('guest', {}).get('booted_in')} s; "
              + ", ".join(f"{name} ended at {step.get('since_boot')} s" for name, step in facts["steps"].items()))
        yield facts
    finally:
        shutil.rmtree(shared, ignore_errors=True)
