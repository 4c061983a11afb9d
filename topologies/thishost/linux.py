"""The Linux calls the backends of VMs on this host make: ip/tc batches, namespaces, processes (cgroups: cgroups.py).

Every command is an argv list built from validated names; nothing goes through a shell.
"""

import fcntl
import functools
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

from vnetbench.core import procs
from vnetbench.core.errors import LaunchError, UsageError, signals_blocked
from vnetbench.core.procs import kill  # noqa: F401 (teardown's and cleanup's kill)

TOOLS = {"ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
         "umount": "util-linux"}


def require_root_and_tools(backend: str, tools: dict[str, str] = TOOLS) -> None:
    """UsageError (nothing started) naming ``backend`` unless this is Linux, we are root and ``tools``
    (command -> its package) exist."""
    if not Path("/proc/self/ns/net").exists():
        raise UsageError(f"the {backend} backend needs Linux network namespaces, which this system lacks")
    if os.geteuid() != 0:
        raise UsageError(f"the {backend} backend needs root: it creates network namespaces, bridges, tc "
                         "qdiscs and cgroups; run vnetbench as root (e.g. with sudo)")
    missing = [f"{tool} ({package})" for tool, package in tools.items() if not shutil.which(tool)]
    if missing:
        raise UsageError(f"the {backend} backend needs {', '.join(missing)}; install them and retry")


# what a terminal sends to vnetbench's process group
_TERMINAL_SIGNALS = (-signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP)


def run(argv: list[str], stdin: str | None = None, timeout: float = 60, check: bool = True):
    for attempt in range(3):
        try:
            # a session of its own: a Ctrl-C at the terminal reaches vnetbench, which finishes what
            # it is doing (a teardown holds signals), but not an ip or tc half-way through. And signals
            # held until the tool has ended: one raised while it started (inside Popen, before its pipes
            # were read) left it running, unwaited, to make its bridge after the teardown had looked
            # (the faults tier's SIGTERM at bring-up, once); held, what it made is there for the teardown
            with signals_blocked():
                done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                                      start_new_session=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LaunchError(f"{shlex.join(argv)}: {exc}") from exc
        # the tool is still in vnetbench's process group for an instant after it starts, where a
        # terminal's signal can end it: that is no answer of the tool's, so ask it again
        if done.returncode not in _TERMINAL_SIGNALS:
            break
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().replace("\n", "; ")
        raise LaunchError(f"{shlex.join(argv)} failed: {detail}")
    return done


def ip_batch(lines: list[str], netns: str | None = None, force: bool = False):
    if not lines:
        return None
    argv = ["ip"] + (["-n", netns] if netns else []) + (["-force"] if force else []) + ["-batch", "-"]
    return run(argv, stdin="\n".join(lines) + "\n", check=not force)


# Open MPI 5's launcher cannot match an interface numbered 32768 or above: PMIx 5.0 (the interface list of
# prterun) reads an interface's index into an int16_t (pmix_ifnametokindex), so prte_if_include never matches such
# an interface, and mpirun ends at once with "No network interfaces were found for out-of-band communications"
# (exit 213; fixed on PMIx's master, openpmix#4182, in no 5.0 release). Linux numbers a namespace's new interfaces
# upwards from the last it gave, never reusing a freed number below, so on a host that has made many (every
# topology makes several; container hosts make them all day) every new bridge gets such an index (the likely cause
# of a CI run's 11 failures, from one test on: the same message and exit code, reproduced with a bridge at 40000).
MATCHABLE_INDEX = 1 << 15


def lowest_free_index() -> int | None:
    """The lowest interface index free in this namespace and below MATCHABLE_INDEX (None: none is)."""
    used = {index for index, _ in socket.if_nameindex()}
    return next((index for index in range(1, MATCHABLE_INDEX) if index not in used), None)


def add_bridge(name: str) -> None:
    """Bridge ``name`` at the lowest free interface index: one that every MPI's launcher can match (above). A
    number taken meanwhile by an interface made elsewhere is chosen afresh."""
    add_link(f"link add {name} type bridge")


def add_link(line: str) -> None:
    """``line`` (an ip batch line ``link add NAME ...``) run with the lowest free interface index (add_bridge)."""
    words = line.split()
    name = words[2]
    for _ in range(3):
        index = lowest_free_index()
        argv = ["ip", *words[:3], *(["index", str(index)] if index else []), *words[3:]]
        done = run(argv, check=False)
        if done.returncode == 0:
            return
        if index is None or name in links() or index not in {i for i, _ in socket.if_nameindex()}:
            break  # not a number someone else took: the failure itself
    detail = (done.stderr or done.stdout).strip().replace("\n", "; ")
    raise LaunchError(f"{shlex.join(argv)} failed: {detail}")


def tc_batch(lines: list[str]):
    if lines:
        run(["tc", "-batch", "-"], stdin="\n".join(lines) + "\n")


@functools.cache
def has_netem() -> bool:
    """Can this kernel delay packets (sch_netem)? Tried on the loopback of a throwaway namespace."""
    if not shutil.which("unshare") or not shutil.which("tc"):
        return False
    done = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                          capture_output=True, timeout=30)
    return done.returncode == 0


def links() -> set[str]:
    """The interfaces of this process's network namespace (not sysfs': a namespace entered without
    remounting /sys still shows the one it was mounted in)."""
    return {name for _, name in socket.if_nameindex()}


_SIOCGIFFLAGS, _IFF_UP, _IFF_RUNNING = 0x8913, 0x1, 0x40


def link_problem(name: str, carrier: bool = True) -> str | None:
    """What is wrong with interface ``name`` ('was deleted', 'was set down', ...), or None. One ioctl on
    this namespace's interface: cheap enough for a job's watch every quarter second."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            raw = fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, struct.pack("16sH", name.encode()[:15], 0))
    except OSError:
        return "was deleted"
    flags = struct.unpack_from("H", raw, 16)[0]
    if not flags & _IFF_UP:
        return "was set down"
    if carrier and not flags & _IFF_RUNNING:  # operationally up: its carrier, or its peer, is there
        return "lost its carrier (its other end is down)"
    return None


def wait_running(names: list[str], timeout: float = 10.0) -> None:
    """Return once every interface of ``names`` is up and operationally up (``link_problem`` finds nothing). A veth's
    carrier comes on when its peer is set up, but the kernel reports it through its link-watch work, which needs
    the RTNL lock: while another topology is being made beside it, a job started at once saw a VM's veth of a
    topology just made as down, and failed naming a link nothing had broken. LaunchError naming the first one that
    is still not up after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        problems = [(name, problem) for name in names if (problem := link_problem(name))]
        if not problems:
            return
        if time.monotonic() >= deadline:
            name, problem = problems[0]
            raise LaunchError(f"interface {name} {problem} {timeout:g} s after it was made")
        time.sleep(0.02)


def netns_names() -> set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except OSError:
        return set()


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def make_uts(path: str, hostname: str) -> None:
    """A UTS namespace with its own hostname, kept alive by a bind mount on ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).touch()
    tool = shutil.which("hostname")
    if tool:
        run(["unshare", f"--uts={path}", tool, hostname])
    else:
        import sys

        run(["unshare", f"--uts={path}", sys.executable, "-c",
             "import socket, sys; socket.sethostname(sys.argv[1])", hostname])


def mounted(path: str) -> bool:
    target = os.path.realpath(path)
    return any(point == target for point, _ in procs.mounts())


def mounts_under(folder: Path) -> list[str]:
    prefix = str(folder).rstrip("/") + "/"
    return [point for point, _ in procs.mounts() if point.startswith(prefix)]


def unmount(path: str) -> None:
    while mounted(path):
        run(["umount", path])


# ---- processes --------------------------------------------------------------------------

def pids_in_netns(inodes: set[int]) -> list[int]:
    """Processes whose network namespace is one of ``inodes`` (the VMs' own processes)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry.name}/ns/net").st_ino in inodes:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def command_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
