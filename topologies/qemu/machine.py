"""What this host offers QEMU guests: the tools, the guest kernel, KVM (and auto's probe), vhost-net, the root's share.

Each is read once per process and said in one line when it is missing (UsageError: nothing was started).
KVM is trusted only when a guest really boots with it: /dev/kvm can be present and answer its API while
guests hang or abort (DESIGN.md, measured 2026-11-24), so ``--accel auto`` and ``kvm`` boot a small probe
guest with KVM alone (``-machine accel=kvm``: QEMU's own fallback to TCG would hide the failure) and take KVM
only when it answers within PROBE_SECONDS (here it aborts at once: "failed to set MSR 0x10a").
"""

import fcntl
import functools
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vnetbench.core.errors import UsageError

QEMU = "qemu-system-x86_64"
PROBE_SECONDS = 30.0
PROBE_MEMORY = "256M"
KVM_GET_API_VERSION = 0xAE00
KVM_API_VERSION = 12
# command -> how to get it, for the one line that says what is missing
TOOLS = {"ip": "iproute2", "tc": "iproute2", QEMU: "apt-get install qemu-system-x86",
         "busybox": "apt-get install busybox-static (virtme-ng's initramfs)", "ssh": "apt-get install openssh-client",
         "ssh-keygen": "apt-get install openssh-client"}
SSHD = "/usr/sbin/sshd"
TCG_WHY = "--accel tcg runs the guests functionally (an emulated CPU: for behaviour, not for timings)"


def virtme_run() -> str | None:
    """virtme-ng's guest launcher: beside this Python (the venv's, pip install 'vnetbench[qemu]'), else on PATH."""
    beside = Path(sys.executable).parent / "virtme-run"
    return str(beside) if os.access(beside, os.X_OK) else shutil.which("virtme-run")


def require() -> None:
    """UsageError (one line, nothing started) unless this host can run the qemu backend's guests."""
    from ..thishost.linux import require_root_and_tools

    require_root_and_tools("qemu", {tool: how for tool, how in TOOLS.items() if tool in ("ip", "tc")})
    missing = [f"{tool} ({how})" for tool, how in TOOLS.items() if not shutil.which(tool)]
    if not virtme_run():
        missing.append("virtme-run (pip install 'vnetbench[qemu]': virtme-ng)")
    if not os.access(SSHD, os.X_OK):
        missing.append(f"{SSHD} (apt-get install openssh-server; the guests start the host's sshd)")
    if not os.path.exists("/dev/net/tun"):
        missing.append("/dev/net/tun (the tun module: the guests' NICs are taps)")
    if missing:
        raise UsageError(f"--vms qemu: this host lacks {', '.join(missing)}")


@functools.cache
def qemu_version() -> str:
    try:
        out = subprocess.run([QEMU, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = re.search(r"version (\S+)", out)
    return found.group(1) if found else "unknown"


# ---- the guest kernel -------------------------------------------------------------------------

def kernel_version(path: str) -> str | None:
    """The release of a bzImage (x86 boot protocol: the header's kernel_version pointer), or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(0x8000)
    except OSError:
        return None
    if head[0x202:0x206] != b"HdrS":
        return None
    offset = struct.unpack_from("<H", head, 0x20E)[0] + 0x200
    text = head[offset:offset + 256].split(b"\0")[0].decode(errors="replace").split()
    return text[0] if text else None


def default_kernel() -> tuple[str, str]:
    """(image, why it was chosen): the running kernel's in /boot, else the newest in /boot with its modules."""
    release = os.uname().release
    running = f"/boot/vmlinuz-{release}"
    if os.access(running, os.R_OK) and os.path.isdir(f"/lib/modules/{release}"):
        return running, "the running kernel's image"
    found = []
    for image in glob.glob("/boot/vmlinuz-*"):
        version = image.removeprefix("/boot/vmlinuz-")
        if os.access(image, os.R_OK) and os.path.isdir(f"/lib/modules/{version}"):
            found.append((_version_key(version), image))
    if not found:
        raise UsageError(f"--vms qemu: no kernel image to boot the guests with: {running} (the running kernel's) "
                         f"is absent and /boot has none with its modules; install one (apt-get install "
                         f"linux-image-amd64) or give --guest-kernel PATH")
    return max(found)[1], f"the newest in /boot ({running}, the running kernel's, is absent)"


def _version_key(version: str) -> tuple:
    return tuple(int(part) if part.isdigit() else -1 for part in re.split(r"[.-]", version))


def kernel(asked: str | None) -> dict:
    """The guest kernel: ``{"image", "version", "chosen_by"}``; UsageError when it cannot boot a guest."""
    image, why = (asked, "given") if asked else default_kernel()
    version = kernel_version(image)
    if version is None:
        raise UsageError(f"guest kernel {image}: not an x86 kernel image (bzImage) whose version can be read")
    if not os.path.isdir(f"/lib/modules/{version}"):
        raise UsageError(f"guest kernel {image}: its modules (/lib/modules/{version}) are not installed; the guest "
                         f"needs its virtio and 9p modules from there")
    return {"image": image, "version": version, "chosen_by": why}


# ---- the accelerator ------------------------------------------------------------------------------

def kvm_problem() -> str | None:
    """Why KVM cannot even be opened here, or None."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return "no /dev/kvm (the kernel has no KVM, or this is a VM without nested virtualisation)"
    except PermissionError:
        return "no permission to open /dev/kvm (run as root, or join the group that owns it)"
    except OSError as exc:
        return f"/dev/kvm does not open ({exc.strerror})"
    try:
        version = fcntl.ioctl(fd, KVM_GET_API_VERSION)
    except OSError as exc:
        return f"/dev/kvm does not answer KVM_GET_API_VERSION ({exc.strerror})"
    finally:
        os.close(fd)
    if version != KVM_API_VERSION:
        return f"/dev/kvm speaks KVM API {version}, not {KVM_API_VERSION}"
    return None


@functools.cache
def kvm_probe(image: str) -> str | None:
    """Why a small guest of ``image`` does not boot with KVM alone within PROBE_SECONDS, or None when it does."""
    work = tempfile.mkdtemp(prefix="vnetbench-kvm-probe-")
    argv = [virtme_run(), "--kimg", image, "--mods", "auto", "--disable-microvm", "--force-9p", "--memory",
            PROBE_MEMORY, "--cpus", "1", "--script-sh", "echo vnetbench-kvm-probe-ok", "--qemu-opts",
            "-machine", "accel=kvm"]
    console = Path(work) / "console"
    began = time.monotonic()
    try:
        with open(console, "w") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env={**os.environ, "TMPDIR": work})
            try:
                proc.wait(PROBE_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            finally:
                from vnetbench.core import procs

                procs.kill_session(proc.pid, grace=1.0)
                proc.wait()
        text = console.read_text(errors="replace")
        if "vnetbench-kvm-probe-ok" in text:
            return None
        tail = " | ".join(line.strip() for line in text.splitlines()[-3:] if line.strip()) or "no output"
        if time.monotonic() - began >= PROBE_SECONDS:
            return f"a probe guest did not boot with KVM within {PROBE_SECONDS:.0f} s (its last lines: {tail})"
        return f"a probe guest did not start with KVM (QEMU exited {proc.returncode}: {tail})"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def accel(asked: str, image: str, what: str = "--accel") -> str:
    """The accelerator the guests run with for ``asked`` (auto, kvm, tcg); UsageError saying why not KVM."""
    if asked == "tcg":
        return "tcg"
    # kvm as well as auto: a guest that cannot boot with KVM is refused in seconds, not after a boot timeout
    problem = kvm_problem() or kvm_probe(image)
    if problem:
        raise UsageError(f"{what} {asked}: KVM cannot run the guests here: {problem}; {TCG_WHY}")
    return "kvm"


# ---- devices --------------------------------------------------------------------------------

@functools.cache
def vhost_net() -> bool:
    """Does /dev/vhost-net open (so that vhost=on works; QEMU only warns when it does not)?"""
    try:
        os.close(os.open("/dev/vhost-net", os.O_RDWR | os.O_CLOEXEC))
        return True
    except OSError:
        return False


@functools.cache
def root_share() -> str:
    """How the guests see the host's root: virtiofs where virtme-ng would start a virtiofsd that can export it
    read-only (the Rust virtiofsd), else 9p (QEMU 7.2's C virtiofsd has no --readonly: a guest could write the
    host's root through it; it also fails to start here, after three seconds per guest)."""
    for path in ("/usr/libexec/virtiofsd", "/usr/lib/virtiofsd/virtiofsd", "/usr/lib/virtiofsd", shutil.which("virtiofsd"),
                 "/usr/lib/qemu/virtiofsd"):
        if not path or not os.access(path, os.X_OK):
            continue
        try:
            shown = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10,
                                   stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if shown.returncode == 0 and "--readonly" in shown.stdout + shown.stderr:
            return "virtiofs"
    return "9p"
