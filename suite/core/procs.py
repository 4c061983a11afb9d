"""Processes as /proc shows them (the one reader of /proc/PID/stat and of this process's mount table), and
ending a whole MPI job:
mpirun, its daemons and every rank, even orphaned ones.

mpirun is started in a session of its own. Ranks get process groups of their own but stay in
that session, so the session id finds them all, including ranks whose mpirun already died.
"""

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state ppid pgrp session ...), or None when
    the process is gone or the line is malformed. comm may hold spaces and ')', hence the last ')'."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    _, paren, rest = stat.rpartition(")")
    fields = rest.split()
    return fields if paren and len(fields) > 19 else None


def sees_as_we_do(pid: int, path: Path) -> bool:
    """Whether ``path`` is, for process ``pid``, the same directory it is for us. A process in a mount
    namespace of its own (a sandbox, a container) may mean by /run/vnetbench/ID a state directory that
    is not ours, and what it marks with that path is not ours to end. False when ``pid`` is gone."""
    try:
        if os.stat(f"/proc/{pid}/ns/mnt").st_ino == os.stat("/proc/self/ns/mnt").st_ino:
            return True
        theirs, ours = os.stat(f"/proc/{pid}/root{path}"), os.stat(path)
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def marked(name: str, under: Path) -> dict[int, str]:
    """pid -> the value of environment variable ``name`` of every other process whose value is ``under`` or a
    path in it, where ``under`` is the same directory for that process as for us (``sees_as_we_do``)."""
    prefix, exact = f"{name}={under}/".encode(), f"{name}={under}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        item = next((item for item in environ.split(b"\0") if item == exact or item.startswith(prefix)), None)
        if item is not None and sees_as_we_do(int(entry.name), under):
            found[int(entry.name)] = item.decode(errors="replace").split("=", 1)[1]
    return found


def mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount this process sees, in /proc/self/mountinfo's order;
    [] when it cannot be read. Mount points come unescaped (the kernel writes a space as \\040)."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        try:  # fields: id parent major:minor root MOUNT_POINT options [optional...] - FSTYPE source super
            point, kind = fields[4], fields[fields.index("-") + 1]
        except (IndexError, ValueError):
            continue
        found.append((re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), point), kind))
    return found


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot): with the pid, it names one process, never a reused pid."""
    fields = stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except ValueError:
        return None


def cpu_seconds(pid: int) -> float:
    """CPU seconds process ``pid`` has used (user + system), 0.0 when it is gone."""
    fields = stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / TICKS if fields else 0.0
    except ValueError:
        return 0.0


TICKS = os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float | None:
    """CPU seconds this machine's cpus have spent running processes since boot (/proc/stat: user, nice and
    system; a guest's time is inside user), or None where /proc/stat cannot be read. Interrupts, steal and idle
    are left out: they run no process, and a switch's forwarding (softirq) is the run's own network."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return (int(fields[1]) + int(fields[2]) + int(fields[3])) / TICKS
    except (OSError, ValueError, IndexError):
        return None


class HostLoad:
    """What other work used of this machine's cpus while a job ran: the machine's busy time (``busy_seconds``)
    less the job's own - this process, its waited-for children (mpirun and, natively, the ranks) and what
    ``own()`` counts (the topology's VMs or guests: Backend.own_cpu_seconds). A timing taken beside other work
    measures the sharing.

        load = HostLoad(realised.own_cpu_seconds); ...the job...; record["launch"]["host_load"] = load.end()
    """

    def __init__(self, own: Callable[[], float | None] = lambda: 0.0):
        self.own = own
        self.began, self.busy, self.used, self.owned = time.monotonic(), busy_seconds(), _usage(), own()

    def end(self) -> dict:
        """{foreign_cpu_s, own_cpu_s, wall_s, cpus, foreign_share}: foreign_share is other work's CPU as a
        fraction of all the machine's cpus over the job's wall time; with ``unknown`` (and no shares) where
        /proc/stat cannot be read or the job's own processes cannot be told from others'."""
        busy, wall, owned = busy_seconds(), time.monotonic() - self.began, self.own()
        cpus = os.cpu_count() or 1
        if busy is None or self.busy is None:
            return {"cpus": cpus, "wall_s": round(wall, 3), "unknown": "/proc/stat cannot be read"}
        if owned is None or self.owned is None:
            return {"cpus": cpus, "wall_s": round(wall, 3),
                    "unknown": "the VMs' processes have no CPU accounting (no cgroups): theirs and others' look alike"}
        own = _usage() - self.used + max(0.0, owned - self.owned)
        foreign = max(0.0, busy - self.busy - own)
        return {"foreign_cpu_s": round(foreign, 3), "own_cpu_s": round(own, 3), "wall_s": round(wall, 3),
                "cpus": cpus, "foreign_share": round(foreign / (max(wall, 1e-3) * cpus), 4)}


def _usage() -> float:
    import resource

    return sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))


def session_members(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields and fields[3] == str(sid) and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def kill_session(sid: int, grace: float = 3.0) -> None:
    """SIGTERM every process of session ``sid``, then SIGKILL what is left after ``grace`` s."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        members = session_members(sid)
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and session_members(sid):
            time.sleep(0.05)


def kill(pids, grace: float = 2.0) -> None:
    """SIGTERM ``pids``, then SIGKILL whatever is still there after ``grace`` seconds (0: at once)."""
    pids = [p for p in pids if p != os.getpid()]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        live = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                live.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while live and time.monotonic() < deadline:
            live = [p for p in live if _exists(p)]
            if live:
                time.sleep(0.02)
        pids = live
        if not pids:
            return


def _exists(pid: int) -> bool:
    fields = stat_fields(pid)
    if fields is None:
        return False
    if fields[0] == "Z":
        try:  # our own child: reap it
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
