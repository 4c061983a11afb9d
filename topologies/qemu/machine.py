"""What this host offers QEMU guests: the tools, the guest kernel, the machine type and its vCPU limit, /dev/kvm,
vhost-net, the root's share and the memory each share backs the guests with.

Each is read once per process and said in one line when it is missing (UsageError: nothing was started).
Whether KVM really runs a guest is probe.py's (a probe guest, its answer cached per boot of the host).
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
from pathlib import Path

from vnetbench.core.errors import UsageError

QEMU = "qemu-system-x86_64"
# One machine type under both accelerators, so that the TCG guests the tests boot are the machine KVM hosts run:
# q35 (ICH9, PCIe). virtme-ng asks for it under TCG and for nothing under KVM, where QEMU's default is ``pc``
# (i440FX/PIIX: IDE and floppy controllers, 255 vCPUs at most). q35 is what current hypervisor stacks give a
# Linux guest (libvirt's and virt-install's default for x86 guests since 2022), carries more vCPUs (QEMU 7.2: 288,
# later versions more) and is the machine guests.UNUSED_MODULES lists the unused drivers of.
MACHINE = "q35"
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
def machine_type() -> dict | None:
    """What QEMU's MACHINE is here: ``{"name": "pc-q35-7.2", "max_cpus": 288}`` (QMP query-machines of this
    host's QEMU, without a guest: ``-machine none``), or None when QEMU does not answer."""
    import json

    asked = b'{"execute":"qmp_capabilities"}\n{"execute":"query-machines"}\n{"execute":"quit"}\n'
    try:
        out = subprocess.run([QEMU, "-machine", "none", "-nodefaults", "-display", "none", "-S", "-qmp", "stdio"],
                             input=asked, capture_output=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        try:
            reply = json.loads(line)
        except ValueError:
            continue
        if isinstance(reply.get("return"), list):
            for found in reply["return"]:
                if MACHINE in (found.get("name"), found.get("alias")):
                    return {"name": found["name"], "max_cpus": found.get("cpu-max")}
    return None


# ---- devices --------------------------------------------------------------------------------

@functools.cache
def vhost_net() -> bool:
    """Does /dev/vhost-net open (so that vhost=on works; QEMU only warns when it does not)?"""
    try:
        os.close(os.open("/dev/vhost-net", os.O_RDWR | os.O_CLOEXEC))
        return True
    except OSError:
        return False


THP = Path("/sys/kernel/mm/transparent_hugepage")


def _chosen(path: Path) -> str | None:
    """The bracketed choice of a sysfs setting ("always [madvise] never" -> "madvise"), or None."""
    try:
        found = re.search(r"\[(\w+)\]", path.read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def backing(rootfs: str, thp: Path = THP) -> dict:
    """The memory QEMU backs a guest's RAM with for ``rootfs``: 9p guests get anonymous memory, virtiofs guests a
    shared memfd (virtiofsd maps the guest's RAM: virtme-ng's memory-backend-memfd); QEMU madvises guest RAM
    MADV_HUGEPAGE, so it is on transparent huge pages where the host's setting for its kind (anonymous:
    ``enabled``; memfd, which is shmem: ``shmem_enabled``) allows an madvised region them."""
    if rootfs == "virtiofs":
        setting = _chosen(thp / "shmem_enabled")
        huge = setting in ("always", "within_size", "advise", "force")
        kind, knob = "memfd", "shmem_enabled"
    else:
        setting = _chosen(thp / "enabled")
        huge = setting in ("always", "madvise")
        kind, knob = "anonymous", "enabled"
    return {"kind": kind, "thp": f"{knob}={setting}" if setting else "no THP in this kernel",
            "page_size": "2 MiB (transparent huge pages)" if huge else "4 KiB"}


@functools.cache
def root_share() -> str:
    """How the guests see the host's root: virtiofs where virtme-ng would start a virtiofsd that can export it
    read-only (the Rust virtiofsd) and its memfd would give the guests' RAM the same pages as 9p's anonymous
    memory, else 9p (QEMU 7.2's C virtiofsd has no --readonly: a guest could write the host's root through it; it
    also fails to start here, after three seconds per guest). The pages matter: with Debian's defaults anonymous
    memory gets transparent huge pages and a memfd does not, so a root share that chose the guests' page size would
    change what a memory-bound benchmark measures; the share follows the memory, never the other way round."""
    if backing("virtiofs")["page_size"] != backing("9p")["page_size"]:
        return "9p"
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
