"""Each MPI job's own directory, and the watch kept over the job while it runs.

A job directory lives under vnetbench's state root (``/run/vnetbench/jobs/RUN_ID`` as root). It
holds the job's temporary files (``TMPDIR`` of mpirun, its daemons and the ranks, so Open MPI's
session directories go there, not into /tmp; its shared-memory segments go there too when the state
root is a tmpfs, else into the job's own directory in /dev/shm that ``shm`` links to) and one
marker per rank: ``ranks/R.json`` when the rank starts (pid, hostname) and ``ranks/R.end`` when
it ends by itself. Every process of the job inherits ``VNETBENCH_JOB_DIR``, so whatever outlives
the job (ranks whose mpirun died, daemons inside a VM that lost its network) is found by its
environment and ended, and the directory is removed, leaving the host as it was.

While the job runs, a thread waits on a pidfd per rank (in the order they die) and asks the
topology every quarter second whether it still stands (``health``, which answers None or what
broke and the VMs it cut off): a VM whose veth was deleted
or whose uplink went down stops the job at once rather than at ``--timeout``. A job whose
vnetbench was killed outright leaves its directory behind with a dead owner; ``sweep_orphans``
(run by each new job and by ``vnetbench topology cleanup``) ends its processes and removes it.
"""

import atexit
import json
import os
import re
import select
import shutil
import signal
import threading
import time
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

from vnetbench.core import procs
from vnetbench.core.procs import start_time as _start_time
from vnetbench.core.rundir import made_in
from vnetbench.core.rundir import JOB_ENV as ENV  # its home: every process of a job reads it
from vnetbench.core.rundir import state_root

SHM = Path("/dev/shm")
# Open MPI 5's sm and 4's vader put their segments (16 MiB each) here; their default, /dev/shm
# itself, is cleaned only by the job's PMIx server: ranks it never served (singletons, as under
# Hydra) or a job killed with its daemons leave them there
SEGMENT_DIRS = ("OMPI_MCA_btl_sm_backing_directory", "OMPI_MCA_btl_vader_backing_directory")
HEALTH_INTERVAL = 0.25  # seconds between two looks at the topology


class Ending(namedtuple("Ending", "rank pid host after_s wait_status", defaults=(None,))):
    """A rank's process that ended while the job ran, ``after_s`` seconds after the job started, with its
    ``wait_status`` as waitpid gives it when it could still be read. A named tuple, not a dataclass
    (``vnetbench.cli`` says why)."""

    __slots__ = ()


class Job:
    """``with Job(run_id, health) as job:`` the job's directory, environment and watch."""

    def __init__(self, run_id: str, health: Callable[[], tuple[str, list[str]] | None] | None = None):
        self.run_id = run_id
        self.health = health
        self.path = state_root() / "jobs" / run_id
        self.endings: list[Ending] = []
        self.problem: dict | None = None  # why the watch stopped the job: {"detail", "vms"}
        self._stop = threading.Event()
        self._wake = None  # a pipe whose write end ``stop`` closes: the watch's select returns at once
        self._thread = None
        self._mpirun: int | None = None  # the job's mpirun, once started
        self._given = threading.Event()  # set when the watch has its mpirun (or is stopped before it)
        self._started = time.monotonic()

    # ---- directory ------------------------------------------------------------------------

    def __enter__(self):
        sweep_orphans()
        made_in((state_root(), self.path.parent), self.path.mkdir)
        (self.path / "tmp").mkdir()
        (self.path / "ranks").mkdir()
        self.segments = _segment_dir(self.path)
        owner = {"pid": os.getpid(), "start": _start_time(os.getpid()), "run_id": self.run_id, "created": time.time()}
        (self.path / "owner.json").write_text(json.dumps(owner))
        atexit.register(self._end)  # should a signal cut __exit__ short
        return self

    def env(self) -> dict[str, str]:
        tmp = str(self.path / "tmp")
        env = {ENV: str(self.path), "TMPDIR": tmp}
        env.update(dict.fromkeys(SEGMENT_DIRS, str(self.segments)))
        return env

    def __exit__(self, *exc):
        self._end()

    def _end(self) -> None:
        self.stop()
        end(self.path)
        atexit.unregister(self._end)

    # ---- watch ----------------------------------------------------------------------------

    def watch(self) -> Callable[[int], None]:
        """Start the watch of the job's ranks and topology; it begins once the function returned is given the
        job's mpirun's pid. Started before mpirun is, while the cores are free: a thread's start waits until it
        runs, and behind a starting mpirun that was up to 4 ms of every run's start."""
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._await_mpirun, args=(self._wake[0],), daemon=True)
        self._thread.start()
        return self._begin

    def _begin(self, mpirun_pid: int) -> None:
        self._started = time.monotonic()
        self._mpirun = mpirun_pid
        self._given.set()

    def _await_mpirun(self, wake: int) -> None:
        self._given.wait()
        if self._mpirun is None:  # stopped before its mpirun started (the launch failed)
            os.close(wake)
            return
        self._watch(self._mpirun, wake)

    def stop(self) -> None:
        self._stop.set()
        self._given.set()  # a watch still waiting for its mpirun ends too
        if self._wake is not None:
            os.close(self._wake[1])  # the watch closes the read end as it ends: it may still be in select
            self._wake = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _watch(self, mpirun_pid: int, wake: int) -> None:
        pidfds: dict[int, tuple[int, int, str]] = {}  # fd -> (rank, pid, host)
        seen: set[int] = set()
        next_health = time.monotonic() + HEALTH_INTERVAL
        try:
            while not self._stop.is_set():
                for rank, pid, host in self._new_ranks(seen):
                    try:
                        pidfds[os.pidfd_open(pid)] = (rank, pid, host)
                    except OSError:  # gone before we looked
                        self.endings.append(Ending(rank, pid, host, self._since()))
                # woken by a rank's end or by ``stop``, at once; meanwhile new markers are looked for every
                # 50 ms (the ranks write them as they start), every 100 ms once there are ranks to wait on
                ready = select.select([wake, *pidfds], [], [], 0.1 if pidfds else 0.05)[0]
                for fd in ready:
                    if fd == wake:
                        continue
                    rank, pid, host = pidfds.pop(fd)
                    self.endings.append(Ending(rank, pid, host, self._since(), _zombie_status(pid)))
                    os.close(fd)
                if wake in ready:
                    return
                if self.health is not None and time.monotonic() >= next_health:
                    next_health = time.monotonic() + HEALTH_INTERVAL
                    problem = self.health()
                    if problem:
                        what, vms = problem
                        self.problem = {"detail": f"{what}, {self._since():.1f} s into the run; the job was stopped",
                                        "vms": vms}
                        procs.kill_session(mpirun_pid, grace=1.0)
                        kill_processes(self.path)
                        return
        finally:
            for fd in [*pidfds, wake]:
                os.close(fd)

    def _new_ranks(self, seen: set[int]):
        try:
            names = os.listdir(self.path / "ranks")
        except OSError:
            return
        for name in names:
            if not name.endswith(".json") or not name[:-5].isdigit() or int(name[:-5]) in seen:
                continue
            rank = int(name[:-5])
            try:
                marker = json.loads((self.path / "ranks" / name).read_text())
            except (OSError, ValueError):
                continue  # being written; next time
            seen.add(rank)
            yield rank, int(marker["pid"]), str(marker.get("host", "?"))

    def _since(self) -> float:
        return time.monotonic() - self._started

    # ---- after the job --------------------------------------------------------------------

    def finished(self, rank: int) -> str | None:
        """How rank ``rank`` said it ended ('finished', 'exception: ...'), or None: it did not say."""
        try:
            return json.loads((self.path / "ranks" / f"{rank}.end").read_text()).get("how")
        except (OSError, ValueError):
            return None

    def culprit(self, stderr: str = "") -> dict | None:
        """The rank that brought the job down: one that raised, else the first to end without
        finishing (as the watch saw them end), else the one Open MPI's report names."""
        reported = {}
        for rank, pid, host, sig in _REPORTED.findall(" ".join(stderr.split())):
            reported.setdefault(int(rank), {"rank": int(rank), "pid": int(pid), "host": host, "signal": int(sig),
                                            "signal_name": _signal_name(int(sig)), "seen_by": "mpirun's report"})
        endings = sorted(self.endings, key=lambda e: e.after_s)
        found = next(((e, how) for e in endings if (how := self.finished(e.rank)) not in (None, "finished")), None) \
            or next(((e, None) for e in endings if self.finished(e.rank) is None), None)
        if found is None:
            return next(iter(reported.values()), None)
        culprit = _described(*found)
        report = reported.get(culprit["rank"])
        if report and "signal" not in culprit and report["pid"] == culprit["pid"]:
            culprit.update(signal=report["signal"], signal_name=report["signal_name"])
        return culprit


# "prterun noticed that process rank 1 with PID 25651 on node vm exited on signal 9 (Killed)."
_REPORTED = re.compile(r"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _described(ending: Ending, how: str | None) -> dict:
    out = {"rank": ending.rank, "pid": ending.pid, "host": ending.host, "after_s": round(ending.after_s, 3),
           "seen_by": "vnetbench's watch"}
    if how:
        out["how"] = how
    status = ending.wait_status
    if status is not None:
        if status & 0x7F:
            out["signal"] = status & 0x7F
            out["signal_name"] = _signal_name(status & 0x7F)
        else:
            out["exit_code"] = status >> 8
    return out


def _zombie_status(pid: int) -> int | None:
    """The wait status of a process that ended and is not reaped yet (/proc/PID/stat field 52)."""
    fields = procs.stat_fields(pid)
    if not fields or fields[0] != "Z" or len(fields) < 50:
        return None
    return int(fields[49])


def _on_tmpfs(path: Path) -> bool:
    target, best, kind = str(path.resolve()), "", ""
    for mount, fs in procs.mounts():  # the deepest mount holding the path decides
        if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
            best, kind = mount, fs
    return kind == "tmpfs"


def _segment_dir(job_dir: Path) -> Path:
    """Where the job's shared-memory segments go: its tmp on a tmpfs, else a directory of its own in
    /dev/shm (a disk-backed file would write the ranks' traffic to disk) that ``job_dir/shm`` names."""
    if _on_tmpfs(job_dir) or not SHM.is_dir():
        return job_dir / "tmp"
    segments = SHM / f"vnetbench-job-{job_dir.name}"
    (job_dir / "shm").symlink_to(segments)  # first, so that whoever removes job_dir finds it
    segments.mkdir(mode=0o700)
    return segments


def _remove(job_dir: Path) -> None:
    """The job's directory and its segment directory in /dev/shm."""
    try:
        segments = Path(os.readlink(job_dir / "shm"))
    except OSError:
        segments = None
    if segments is not None and segments.parent == SHM and segments.name == f"vnetbench-job-{job_dir.name}":
        shutil.rmtree(segments, ignore_errors=True)
    shutil.rmtree(job_dir, ignore_errors=True)


def kill_processes(job_dir: Path) -> list[int]:
    """End every process that carries this job's directory in its environment; their pids."""
    found = [pid for pid, value in procs.marked(ENV, job_dir).items() if value == str(job_dir)]
    procs.kill(found, grace=0)
    return found


def end(job_dir: Path) -> None:
    """What is left of a job: its processes, then its directory (and the parents, when empty)."""
    kill_processes(job_dir)
    _remove(job_dir)
    _remove_if_empty(job_dir.parent)


def _remove_if_empty(jobs: Path) -> None:
    for folder in (jobs, jobs.parent):
        try:
            os.rmdir(folder)
        except OSError:  # not empty: in use by another job, or holding topology state
            return


def sweep_orphans() -> list[str]:
    """End the jobs of vnetbench processes that died without ending them (killed with SIGKILL)."""
    folder = state_root() / "jobs"
    removed = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = []
    for name in names:
        path = folder / name
        try:
            owner = json.loads((path / "owner.json").read_text())
        except (OSError, ValueError):
            if time.time() - _mtime(path) < 60:
                continue  # being created
            owner = {}
        if owner and _start_time(owner.get("pid", -1)) == owner.get("start"):
            continue  # its vnetbench is still running
        age = time.time() - owner.get("created", _mtime(path) or time.time())
        pids = kill_processes(path)
        _remove(path)
        removed.append(f"job {name} of process {owner.get('pid', '?')}, which is gone ({age:.0f} s old"
                       + (f"; ended {len(pids)} process(es))" if pids else ")"))
    for segments in sorted(SHM.glob("vnetbench-job-*")):
        # a job's directory goes after its segments' (``_remove``): segments without one are a leak
        if not (folder / segments.name.removeprefix("vnetbench-job-")).exists() and _mine(segments):
            shutil.rmtree(segments, ignore_errors=True)
            removed.append(f"shared-memory directory {segments} of a job that is gone")
    _remove_if_empty(folder)
    for path in sorted(state_root().glob("*-*-*-*")):
        found = _OWNED.fullmatch(path.name)
        if found and path.is_dir() and _start_time(int(found[2])) != int(found[3]):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"{found[1]} directory {path.name} of process {found[2]}, which is gone")
    return removed


_OWNED = re.compile(r"([a-z]+)-(\d+)-(\d+)-\w+")  # make_dir's names: KIND-PID-START-RANDOM


def _mine(path: Path) -> bool:
    """Made by this user (another user's jobs live under another state root)."""
    try:
        return path.lstat().st_uid == os.geteuid()
    except OSError:
        return False


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
