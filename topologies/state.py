"""What the netns backend has up: one JSON file per topology under /run/vnetbench/ID/.

The state is written before anything is created (``complete: false``) and lists every name
that will exist, so that whatever a crash leaves half-built can still be found and removed.
``owner`` is the process that will tear the topology down when it exits (a run), or None for
one brought up by ``vnetbench topology up``, which stays until ``down``.
Only the standard library is used here: the launch agent reads these files on every launch.
"""

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

RUN_DIR = Path("/run/vnetbench")
VERSION = 1


def directory(topology_id: str) -> Path:
    return RUN_DIR / topology_id


def read(topology_id: str) -> dict | None:
    try:
        return json.loads((directory(topology_id) / "state.json").read_text())
    except (OSError, ValueError):
        return None


def write(state: dict) -> None:
    folder = directory(state["id"])
    folder.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = folder / f"state.json.tmp{os.getpid()}"
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, folder / "state.json")


def all_states() -> list[dict]:
    found = []
    try:
        entries = sorted(RUN_DIR.iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.is_dir() and _is_id(entry.name):
            state = read(entry.name)
            if state is not None:
                found.append(state)
    return found


def orphan_dirs() -> list[Path]:
    """State directories without a readable state file (a crash before the first write)."""
    try:
        return [e for e in sorted(RUN_DIR.iterdir()) if e.is_dir() and _is_id(e.name) and read(e.name) is None]
    except OSError:
        return []


def _is_id(name: str) -> bool:
    return len(name) == 4 and all(c in "0123456789abcdef" for c in name)


@contextlib.contextmanager
def locked():
    """One vnetbench at a time changes what is up (bringing up, tearing down, cleaning up)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True, mode=0o755)
    with open(RUN_DIR / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def me() -> dict:
    return {"pid": os.getpid(), "start": _start_time(os.getpid())}


def alive(owner: dict | None) -> bool:
    """Is the owning process still running (the same process, not a reused pid)?"""
    return bool(owner) and _start_time(owner["pid"]) == owner.get("start")


def is_mine(state: dict) -> bool:
    return bool(state.get("owner")) and state["owner"].get("pid") == os.getpid() and alive(state["owner"])


def stale(state: dict) -> bool:
    """Left behind: its owner died, or it was never finished and nobody is finishing it."""
    owner = state.get("owner")
    if owner:
        return not alive(owner)
    return not state.get("complete")


def find_vm(hostname: str) -> tuple[dict, dict] | None:
    """(state, vm) of the VM with this hostname in a topology that is up, or None."""
    for state in all_states():
        if not state.get("complete"):
            continue
        for vm in state["layout"]["vms"]:
            if vm["hostname"] == hostname:
                return state, vm
    return None


def now() -> float:
    return time.time()
