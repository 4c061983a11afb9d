"""The VMs' cgroups: one home for confining a VM's vCPUs and memory, on cgroup v2, v1 or hybrid hosts.

``mode()`` says what the host has: "v2" (the unified hierarchy at /sys/fs/cgroup), "hybrid" (v1
controllers beside an empty unified mount), "v1" or "none". On v1 and hybrid hosts each VM gets a
folder in the cpuset and in the memory hierarchy, inside this process's own cgroups (as before).

On v2 each VM gets one folder with cpuset.cpus, cpuset.mems, memory.max and memory.swap.max. v2
lets a cgroup hand domain controllers to its children only while it has no processes of its own
(the root is exempt), and this process is always in its own cgroup: so the VMs' folders go into
the nearest ancestor of it that holds no processes, else the root. +cpuset +memory are enabled in
cgroup.subtree_control on the path from the root to that folder, and nowhere else. What we enabled
is remembered in one file beside the topologies' states (the ``ENABLED`` file, written under the
state lock), so that whichever topology goes down last disables it again: a controller is
disabled only where we enabled it and the cgroup has no children left that could be using it.
Where none of this works, the caller falls back to cpu affinity and says so (``enforcement``).
"""

import errno
import json
import os
import time
from pathlib import Path

from vnetbench.core.errors import LaunchError
from vnetbench.core.procs import kill

from . import state

ROOT = Path("/sys/fs/cgroup")
# cpuset and memory confine a VM; cpuacct counts the CPU its processes used (a run's own, told from other work's:
# procs.HostLoad), inherited by every process the launch agent starts there, daemonised or not
KINDS = ("cpuset", "memory", "cpuacct")
# the v2 controllers a VM needs (v2 counts every group's CPU in its cpu.stat, with no controller to enable)
V2_CONTROLLERS = ("cpuset", "memory")
ENABLED = state.RUN_DIR / ".cgroup-v2-enabled.json"  # hidden: not a topology's state directory


def _mounts() -> list[tuple[str, str, list[str]]]:
    """(mount point, fstype, super options) of every cgroup mount of this process."""
    found = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            sep = fields.index("-")
            if fields[sep + 1] in ("cgroup", "cgroup2"):
                found.append((fields[4], fields[sep + 1], fields[sep + 3].split(",")))
    except (OSError, ValueError, IndexError):
        pass
    return found


def mode() -> str:
    """"v2", "hybrid", "v1" or "none": how this host's cgroups are mounted."""
    mounts = _mounts()
    if any(point == str(ROOT) and kind == "cgroup2" for point, kind, _ in mounts):
        return "v2"
    if any(kind == "cgroup" for _, kind, _ in mounts):
        return "hybrid" if any(kind == "cgroup2" for _, kind, _ in mounts) else "v1"
    return "none"


# ---- v1 (and hybrid): a folder per VM in each controller's own hierarchy --------------------

def v1_root(controller: str) -> Path | None:
    """Where this process's cgroup of a v1 controller is, so VM cgroups nest inside it."""
    mount = next((Path(point) for point, kind, opts in _mounts() if kind == "cgroup" and controller in opts), None)
    if mount is None:
        return None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                folder = mount / path.lstrip("/")
                return folder if os.access(folder, os.W_OK) else None
    except OSError:
        pass
    return None


# ---- v2: one folder per VM, in the nearest process-free ancestor of our cgroup ---------------

def _own_v2() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return ROOT / line[3:].strip().lstrip("/")
    except OSError:
        pass
    return None


def _has_processes(folder: Path) -> bool:
    try:
        return bool((folder / "cgroup.procs").read_text().split())
    except OSError:
        return True


def v2_parent() -> Path | None:
    """Where the VMs' folders go on a v2 host: None when cpuset and memory cannot be had there."""
    own = _own_v2()
    if own is None:
        return None
    parent = own if own == ROOT else next((p for p in own.parents if p == ROOT or not _has_processes(p)), ROOT)
    try:
        available = (ROOT / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    if not all(kind in available for kind in V2_CONTROLLERS) or not os.access(parent, os.W_OK):
        return None
    return parent


def _path_to(parent: Path) -> list[Path]:
    """The cgroups whose subtree_control must hold our controllers: the root down to ``parent``."""
    return [p for p in reversed([parent, *parent.parents]) if p == ROOT or ROOT in p.parents]


def _subtree(folder: Path) -> list[str]:
    return (folder / "cgroup.subtree_control").read_text().split()


def _enable(parent: Path) -> None:
    """+cpuset +memory on the path to ``parent``; what was off is added to the ENABLED file first,
    so that a crash half-way still lets the last teardown switch it off."""
    for folder in _path_to(parent):
        missing = [kind for kind in V2_CONTROLLERS if kind not in _subtree(folder)]
        if not missing:
            continue
        enabled = _read_enabled()
        enabled[str(folder)] = sorted(set(enabled.get(str(folder), [])) | set(missing))
        _write_enabled(enabled)
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{kind}" for kind in missing))


def _disable_unused() -> None:
    """Switch off what we enabled, deepest first, where the cgroup has no children left."""
    enabled = _read_enabled()
    for path in sorted(enabled, key=lambda p: -p.count("/")):
        folder = Path(path)
        if not folder.is_dir():
            del enabled[path]
            continue
        if any(entry.is_dir() for entry in folder.iterdir()):
            continue  # another topology's VMs, or someone else's cgroups, may use them
        on = _subtree(folder)
        off = [kind for kind in enabled[path] if kind in on]
        try:
            if off:
                (folder / "cgroup.subtree_control").write_text(" ".join(f"-{kind}" for kind in off))
        except OSError as exc:
            raise LaunchError(f"cannot disable {', '.join(off)} in {folder}/cgroup.subtree_control, which "
                              f"vnetbench enabled: {exc.strerror}") from exc
        del enabled[path]
    _write_enabled(enabled)


def _read_enabled() -> dict:
    try:
        found = json.loads(ENABLED.read_text())
    except (OSError, ValueError):
        return {}
    # only cgroups under the hierarchy, and only our controllers: an edited file switches nothing else
    return {path: [k for k in kinds if k in V2_CONTROLLERS] for path, kinds in found.items()
            if isinstance(path, str) and isinstance(kinds, list) and ".." not in path.split("/")
            and (Path(path) == ROOT or ROOT in Path(path).parents)} if isinstance(found, dict) else {}


def _write_enabled(enabled: dict) -> None:
    if not enabled:
        ENABLED.unlink(missing_ok=True)
        return
    ENABLED.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = ENABLED.with_name(f"{ENABLED.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(enabled, indent=1, sort_keys=True))
    os.replace(tmp, ENABLED)


# ---- the interface the backends of VMs on this host use ----------------------------------------

def plan(folder_names: dict[str, str]) -> tuple[str, dict]:
    """(mode, {"cpuset": {vm: folder}, "memory": {vm: folder}}) for VMs named ``vm`` whose folders
    are named ``folder_names[vm]``; a kind this host cannot confine with is {}. On v2 both kinds
    name the same folder."""
    found = mode()
    if found == "v2":
        parent = v2_parent()
        folders = {vm: str(parent / name) for vm, name in folder_names.items()} if parent else {}
        return found, {"cpuset": folders, "memory": dict(folders), "cpuacct": dict(folders)}
    planned = {}
    for kind in KINDS:
        root = v1_root(kind) if found in ("v1", "hybrid") else None
        planned[kind] = {vm: str(root / name) for vm, name in folder_names.items()} if root else {}
    return found, planned


def create(found: str, cgroups: dict, vm: str, cpus: str, mems: str, memory: int) -> None:
    """Make VM ``vm``'s folder(s) as ``cgroups`` (a ``plan`` for mode ``found``) says: its cpus,
    NUMA nodes and memory cap."""
    try:
        _create(found, cgroups, vm, cpus, mems, memory)
    except OSError as exc:
        raise LaunchError(f"cannot confine VM {vm} in its cgroup ({exc.filename or 'cgroup'}): {exc.strerror}; "
                          f"cgroup mode {found}") from exc


def _create(found: str, cgroups: dict, vm: str, cpus: str, mems: str, memory: int) -> None:
    cpuset, limit = cgroups.get("cpuset", {}).get(vm), cgroups.get("memory", {}).get(vm)
    if found == "v2" and cpuset:
        folder = Path(cpuset)
        _enable(folder.parent)
        folder.mkdir(exist_ok=True)
        (folder / "cpuset.cpus").write_text(cpus)
        (folder / "cpuset.mems").write_text(mems)
        (folder / "memory.max").write_text(str(memory))
        if (folder / "memory.swap.max").exists():  # else the cap only moves the excess to swap
            (folder / "memory.swap.max").write_text("0")
        return
    if cpuset:
        Path(cpuset).mkdir(exist_ok=True)
        (Path(cpuset) / "cpuset.cpus").write_text(cpus)
        (Path(cpuset) / "cpuset.mems").write_text(mems)
    if limit:
        Path(limit).mkdir(exist_ok=True)
        (Path(limit) / "memory.limit_in_bytes").write_text(str(memory))
    counted = cgroups.get("cpuacct", {}).get(vm)
    if counted:
        Path(counted).mkdir(exist_ok=True)


def usage(found: str, cgroups: dict) -> float | None:
    """CPU seconds the processes of every VM of ``cgroups`` (a ``plan``) have used, the dead ones' included;
    None where the VMs have no accounting folder (a host without cgroups: their processes cannot be told
    from other work's)."""
    counted = cgroups.get("cpuacct") or {}
    if not counted:
        return None
    total = 0.0
    for folder in counted.values():
        try:
            if found == "v2":
                stat = dict(line.split() for line in (Path(folder) / "cpu.stat").read_text().splitlines())
                total += int(stat["usage_usec"]) / 1e6
            else:
                total += int((Path(folder) / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError, KeyError):
            return None
    return total


def folders(cgroups: dict) -> list[str]:
    """Every folder of ``cgroups`` (a ``plan``), once."""
    return list(dict.fromkeys(path for kind in KINDS for path in (cgroups.get(kind) or {}).values()))


def join(folder: str) -> None:
    with open(Path(folder) / "cgroup.procs", "w") as handle:
        handle.write(str(os.getpid()))


def pids(folder: str) -> list[int]:
    try:
        return [int(p) for p in (Path(folder) / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove(folder: str) -> None:
    """Remove one VM folder, killing what is still in it (v2's cgroup.kill catches forks too)."""
    for _ in range(50):
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise LaunchError(f"cannot remove cgroup {folder}: {exc.strerror}") from exc
            try:
                (Path(folder) / "cgroup.kill").write_text("1")
            except OSError:
                kill(pids(folder), grace=0.5)
            time.sleep(0.05)
    raise LaunchError(f"cannot remove cgroup {folder}: processes keep it busy")


def release(found: str, cgroups: dict) -> None:
    """Remove the folders of ``cgroups`` (a ``plan``) and, on v2, what no topology needs any more."""
    for folder in folders(cgroups):
        remove(folder)
    if found == "v2":
        _disable_unused()


def roots() -> list[Path]:
    """Where VM folders live on this host (to find orphans): one per hierarchy."""
    if mode() == "v2":
        parent = v2_parent()
        return [parent] if parent else []
    return [root for root in (v1_root(kind) for kind in KINDS) if root]


def enforcement(found: str, cgroups: dict) -> dict:
    """What confines the VMs' vCPUs and memory under ``cgroups`` (a ``plan``), in words."""
    version = "v2" if found == "v2" else "v1"
    return {"vcpus": f"cgroup {version} cpuset" if cgroups.get("cpuset") else "cpu affinity",
            "memory": (f"cgroup {version} " + ("memory.max" if version == "v2" else "memory.limit_in_bytes"))
            if cgroups.get("memory") else "none"}
