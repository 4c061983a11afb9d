"""Does KVM run the guests here: a probe guest booted with what they will use, its answer kept for this host boot.

KVM is trusted only when a guest really boots with it: /dev/kvm can be present and answer its API while guests hang
or abort (DESIGN.md, measured 2026-11-24), so ``--accel auto`` and ``kvm`` boot a small probe guest with KVM alone
(``accel=kvm``: QEMU's own fallback to TCG would hide the failure) and take KVM only when it answers within
PROBE_SECONDS (here it aborts at once: "failed to set MSR 0x10a"). The probe is the guests' machine (q35), root
share (9p or virtiofs), largest memory and vCPU count, and a NIC with vhost=on where vhost-net is to be used: what
the guests would only find at their boot timeout is found here, in seconds.

Its answer is kept in CACHE under a key of this boot of the host (/proc/sys/kernel/random/boot_id), /dev/kvm and
the QEMU binary (inode and modification time: a reinstalled QEMU or a reloaded KVM module is probed again) and what
was probed; a probe that ran out of time is not kept (a loaded host, not a verdict). lifecycle.py runs no probe at
all for a topology whose guests are up (life.preflight).
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from vnetbench.core.errors import UsageError

from ..thishost import state
from . import machine

PROBE_SECONDS = 30.0
PROBE_MEMORY = 256 << 20
CACHE = state.RUN_DIR / ".cache" / "kvm-probe.json"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
KVM = Path("/dev/kvm")
OK = "vnetbench-kvm-probe-ok"
FELL_BACK = ("falling back on userspace virtio", "vhost-net support is not compiled", "vhost_set_",
             "vhost-net requested but could not be initialized", "Error starting vhost")


def needs(topology, vhost: bool, rootfs: str) -> dict:
    """What the probe guest boots with for ``topology``'s guests: the machine, the root share, the largest memory and
    vCPU count of its VMs, a vhost-net NIC or none."""
    return {"machine": machine.MACHINE, "rootfs": rootfs, "vhost": vhost,
            "memory_mib": max([PROBE_MEMORY, *(vm.memory for vm in topology.vms)]) >> 20,
            "vcpus": max([1, *(vm.vcpus for vm in topology.vms)])}


def _identity_of(path: Path) -> str | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return f"{os.path.realpath(path)}:{found.st_dev}:{found.st_ino}:{found.st_rdev}:{found.st_mtime_ns}"


def identity(qemu: str | None = None, kvm: Path = KVM, boot_id: Path = BOOT_ID) -> dict:
    """What a kept answer is valid for: this boot of the host, /dev/kvm and the QEMU binary as they are now."""
    try:
        boot = boot_id.read_text().strip()
    except OSError:
        boot = None
    qemu = qemu or shutil.which(machine.QEMU) or machine.QEMU
    return {"boot_id": boot, "kvm": _identity_of(kvm), "qemu": _identity_of(Path(qemu))}


def _key(image: str, probed: dict) -> str:
    return json.dumps({"image": _identity_of(Path(image)), **probed}, sort_keys=True)


def kept(image: str, probed: dict, now: dict, cache: Path = CACHE) -> dict | None:
    """The answer kept for this probe under ``now`` (identity()), or None."""
    try:
        held = json.loads(cache.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(held, dict) or held.get("identity") != now:
        return None
    return (held.get("answers") or {}).get(_key(image, probed))


def keep(image: str, probed: dict, now: dict, answer: dict, cache: Path = CACHE) -> None:
    try:
        held = json.loads(cache.read_text())
    except (OSError, ValueError):
        held = {}
    if not isinstance(held, dict) or held.get("identity") != now:
        held = {"identity": now, "answers": {}}  # another boot, another /dev/kvm or QEMU: nothing older holds
    held["answers"][_key(image, probed)] = answer
    cache.parent.mkdir(parents=True, exist_ok=True)
    scratch = cache.with_suffix(f".{os.getpid()}")
    scratch.write_text(json.dumps(held, indent=1))
    os.replace(scratch, cache)


def argv(image: str, probed: dict) -> list[str]:
    """virtme-run's argv for the probe guest."""
    args = [machine.virtme_run() or "virtme-run", "--kimg", image, "--mods", "auto", "--disable-microvm",
            "--memory", f"{probed['memory_mib']}M", "--cpus", str(probed["vcpus"]), "--script-sh", f"echo {OK}"]
    args += ["--force-9p"] if probed["rootfs"] == "9p" else []
    args += ["--qemu-opts", "-machine", f"{probed['machine']},accel=kvm"]
    if probed["vhost"]:
        # a tap QEMU makes itself (not persistent: it goes with QEMU), with vhost as the guests' NICs ask for it
        args += ["-netdev", f"tap,id=p0,ifname=vnbprobe{os.getpid() % 100000},script=no,downscript=no,vhost=on",
                 "-device", "virtio-net-pci,netdev=p0"]
    return args


def run(image: str, probed: dict) -> dict:
    """Boot the probe guest: ``{"problem": why not (None: it booted), "vhost": what QEMU said of it, "timed_out"}``."""
    work = tempfile.mkdtemp(prefix="vnetbench-kvm-probe-")
    console = Path(work) / "console"
    began = time.monotonic()
    try:
        with open(console, "w") as out:
            proc = subprocess.Popen(list(argv(image, probed)), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "TMPDIR": work})
            try:
                proc.wait(PROBE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            finally:
                from vnetbench.core import procs

                procs.kill_session(proc.pid, grace=1.0)
                proc.wait()
        text = console.read_text(errors="replace")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fell_back = vhost_said(text)
    answer = {"problem": None, "vhost": fell_back, "timed_out": False, "at": time.time()}
    if OK in text:
        return answer
    tail = " | ".join(line.strip() for line in text.splitlines()[-3:] if line.strip()) or "no output"
    if time.monotonic() - began >= PROBE_SECONDS:
        return {**answer, "timed_out": True,
                "problem": f"a probe guest did not boot with KVM within {PROBE_SECONDS:.0f} s (its last lines: {tail})"}
    return {**answer, "problem": f"a probe guest did not start with KVM (QEMU exited {proc.returncode}: {tail})"}


def vhost_said(text: str) -> str | None:
    """QEMU's line saying vhost did not start (it then carries on with userspace virtio), or None."""
    for line in text.splitlines():
        if any(words in line for words in FELL_BACK):
            return line.strip()[:300]
    return None


def answer(image: str, probed: dict) -> dict:
    """The probe's answer for ``probed``: kept from earlier in this boot of the host, else probed now (and kept)."""
    now = identity()
    found = kept(image, probed, now)
    if found is not None:
        return {**found, "cached": True}
    fresh = run(image, probed)
    if not fresh["timed_out"]:
        try:
            keep(image, probed, now, fresh)
        except OSError:
            pass  # an answer not kept is asked again next time
    return {**fresh, "cached": False}


def accel(asked: str, image: str, probed: dict, given: tuple[str, str] | None = None) -> tuple[str, dict | None]:
    """(the accelerator for ``asked``, the probe's answer or None); UsageError saying why not KVM. ``given``:
    (where ``asked`` came from, how to ask for another value there), as ``QemuTopology.given`` says."""
    if asked == "tcg":
        return "tcg", None
    # kvm as well as auto: a guest that cannot boot with KVM is refused in seconds, not after a boot timeout
    problem = machine.kvm_problem()
    found = None
    if not problem:
        found = answer(image, probed)
        problem = found["problem"]
        if problem and found.get("cached"):
            problem += f" (probed {time.strftime('%H:%M', time.localtime(found['at']))}, kept for this boot in {CACHE})"
    if problem:
        what, other = given or (f"--accel {asked}", "--accel {}")
        raise UsageError(f"{what}: KVM cannot run the guests here: {problem}; "
                         f"{machine.TCG_WHY.replace('--accel tcg', other.format('tcg'))}")
    return "kvm", found
