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
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        try:  # our own child: reap it
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
