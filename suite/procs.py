"""Ending a whole MPI job: mpirun, its daemons and every rank, even orphaned ones.

mpirun is started in a session of its own. Ranks get process groups of their own but stay in
that session, so the session id finds them all, including ranks whose mpirun already died.
"""

import os
import signal
import time
from pathlib import Path


def session_members(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # fields after the ")" that closes comm: state ppid pgrp session ...
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] != "Z":
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


def kill_pids(pids, wait: float = 5.0) -> None:
    """SIGKILL ``pids`` (what is left of a job that is over) and wait until they are gone."""
    pids = [pid for pid in pids if pid != os.getpid()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _alive(pid)]
        if pids:
            time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
