"""What the backends of VMs on this host have up: one JSON file per topology under /run/vnetbench/ID/.

The state is written before anything is created (``complete: false``) and lists every name
that will exist, so that whatever a crash leaves half-built can still be found and removed.
``owner`` is the process that will tear the topology down when it exits (a run), or None for
one brought up by ``vnetbench topology up``, which stays until ``down``; ``backend`` is the backend
whose topology it is (states from before that field are the emulated VMs'). lifecycle.py keeps them.
Only the standard library is used here: the launch agent reads these files on every launch.
"""

import contextlib
import fcntl
import json
import os
import re
import time
from pathlib import Path

from vnetbench.core.procs import start_time

from vnetbench.topologies.base import entries

RUN_DIR = Path("/run/vnetbench")
VERSION = 1


# the names fabric.py and the backends give what they make; nothing else is ever removed, killed or entered
ID = re.compile(r"[0-9a-f]{4}")
VM_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"  # a VM's name: a lower-case DNS label
# the fabric's links: switches (s; x: a macvlan parent's peer), the physical switch (p), uplinks (u..a/b), the head's
# link on a switch that is no bridge (h, its peer g); and the VMs' links each backend declares in its registry line
# (emulated VMs' veths v, QEMU guests' taps t)
FABRIC_LINKS = (r"s\d{1,3}x?", "p", "h", "g", r"u\d{1,3}[ab]")
ANY_LINK = re.compile(r"vnb([0-9a-f]{4})(?:%s)" % "|".join(
    FABRIC_LINKS + tuple(link for entry in entries(with_plugins=False).values() for link in entry.links)))
ANY_NETNS = re.compile(rf"vnb-([0-9a-f]{{4}})-{VM_LABEL}")  # also the VMs' cgroup folders


def foreign_names(st: dict) -> list[str]:
    """What a state names that vnetbench would not have made for it (a damaged or edited file):
    links, namespaces, UTS mounts and cgroups outside the topology's own names and places."""
    tid = st.get("id")
    if not isinstance(tid, str) or not ID.fullmatch(tid):
        return [f"id {tid!r}"]
    lay = st.get("layout") or {}
    bad = []

    def ours(pattern, name) -> bool:
        found = isinstance(name, str) and pattern.fullmatch(name)
        return bool(found) and found.group(1) == tid

    # a VM's link into its switch: an emulated VM's veth, a QEMU guest's tap (which has no namespace or UTS mount)
    links = [vm.get("tap" if "tap" in vm else "veth") for vm in lay.get("vms", [])]
    for sw in lay.get("switches", []):
        links += [sw.get("bridge"), *(sw.get("uplink") or [])]
    links += [name for name in (lay.get("physical"), lay.get("head_bridge")) if name is not None]
    bad += [f"interface {name!r}" for name in links if not ours(ANY_LINK, name)]
    uts_dir = directory(tid) / "uts"
    for vm in (vm for vm in lay.get("vms", []) if "tap" not in vm):
        if not ours(ANY_NETNS, vm.get("netns")):
            bad.append(f"namespace {vm.get('netns')!r}")
        if not isinstance(vm.get("uts"), str) or Path(vm["uts"]).parent != uts_dir \
                or not re.fullmatch(VM_LABEL, Path(vm["uts"]).name):
            bad.append(f"UTS mount {vm.get('uts')!r}")
    for kind, paths in (st.get("cgroups") or {}).items():
        for path in (paths or {}).values():
            if not isinstance(path, str) or not path.startswith("/sys/fs/cgroup/") or ".." in path.split("/") \
                    or not ours(ANY_NETNS, os.path.basename(path)):
                bad.append(f"{kind} cgroup {path!r}")
    return bad


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


def me() -> dict:
    return {"pid": os.getpid(), "start": start_time(os.getpid())}


def alive(owner: dict | None) -> bool:
    """Is the owning process still running (the same process, not a reused pid)?"""
    return bool(owner) and start_time(owner["pid"]) == owner.get("start")


def hold(topology_id: str) -> None:
    """Mark this process as a run using the topology (attached to it, not its owner): a file named after it
    in the topology's folder, which ``holders`` reads and ``release`` removes (a dead holder's is ignored)."""
    path = _held_file(topology_id)
    path.parent.mkdir(exist_ok=True, mode=0o755)
    path.write_text(json.dumps(me()))


def release(topology_id: str) -> None:
    try:
        _held_file(topology_id).unlink()
    except OSError:
        pass


def _held_file(topology_id: str) -> Path:
    return directory(topology_id) / "held" / str(os.getpid())


def holders(state: dict) -> list[int]:
    """The live processes (runs) that hold the topology: its owner, and those attached to it."""
    found = [state["owner"]["pid"]] if alive(state.get("owner")) else []
    try:
        entries = sorted((directory(state["id"]) / "held").iterdir())
    except OSError:
        return found
    for entry in entries:
        try:
            held = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(held, dict) and isinstance(held.get("pid"), int) and alive(held) and held["pid"] not in found:
            found.append(held["pid"])
    return found


def is_mine(state: dict) -> bool:
    return bool(state.get("owner")) and state["owner"].get("pid") == os.getpid() and alive(state["owner"])


def stale(state: dict) -> bool:
    """Left behind: its owner died, or it was never finished and nobody is finishing it."""
    owner = state.get("owner")
    if owner:
        return not alive(owner)
    return not state.get("complete")


def find_vm(hostname: str) -> tuple[dict, dict] | None:
    """(state, vm) of the emulated VM with this hostname in a topology that is up, or None."""
    for state in all_states():
        if not state.get("complete"):
            continue
        for vm in state["layout"]["vms"]:
            if vm["hostname"] == hostname and "netns" in vm:  # a QEMU guest is no namespace to enter
                return state, vm
    return None


def now() -> float:
    return time.time()
