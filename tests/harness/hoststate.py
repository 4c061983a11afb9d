"""What vnetbench could leave behind on this host, snapshotted so that "unchanged" is one comparison.

``network()`` covers vnetbench's interfaces, bridges, namespaces, qdiscs, addresses, routes, mounts,
cgroups and state directories. ``everything()`` adds the processes an MPI job or vnetbench consists of and
the files vnetbench could leave in the shared temporary places (/tmp, /var/tmp, /dev/shm).

Only what is ours is judged: objects carrying vnetbench's names, and - inside a ``Watch``, which every test
that checks the host holds - the processes that carry the test's mark (an environment variable its children
inherit, through mpirun, the launch agent and QEMU alike) and the files in the test's own temporary folder
(its TMPDIR). A contributor's editor, build, MPI job or VM that comes and goes meanwhile is none of the
check's business, and nothing of it is removed. The deploy tier's sshd namespaces ("vnbt...") and pytest's
own temporary tree are not vnetbench's and are left out.
"""

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# vnetbench's names (topologies/thishost/fabric.py, topologies/netns/plan.py); other tiers' objects (the deploy
# tier's sshd namespaces, "vnbt...") may come and go while tests run, and are left out of the comparison
OURS = re.compile(r"^vnb(-[0-9a-f]{4}-|[0-9a-f]{4}[spvuthg])")
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
SANDBOX_LANE = "VNETBENCH_TEST_SANDBOX_LANE"  # set by tests/harness/lanes.py in its second lane
MARK = "VNETBENCH_TEST_OWNER"  # a Watch's token, inherited by every process the test starts
# what vnetbench names its entries in the temporary places (suite/core/rundir.py, the jobs' segment folders, the
# kvm probe); the tests' own folders (a Watch's "vnbtest-", the guest tier's "vnb-guest-") are not vnetbench's
OUR_TEMP = re.compile(r"^vnetbench")
# processes of an MPI job, of a launch agent (python -m vnetbench.topologies...agent), of a vnetbench command, of
# a qemu backend's guest (QEMU, virtme-ng's launcher, virtiofsd, a run's watchdog of its guests) or of the Open
# vSwitch vnetbench starts
JOB_PROCESS = re.compile(r"^(prterun|prted|mpirun|qemu-system-x86|virtme-run|virtiofsd|ovs-vswitchd|ovsdb-server)$")
JOB_COMMAND = re.compile(r"-m vnetbench(\.kernels|\.topologies(\.\w+)*\.(agent|watchdog))?( |$)")


def _json(*argv) -> list:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


def _considered(name) -> bool:
    """Whether an object of this name is vnetbench's: others' links, namespaces and mounts come and go."""
    return bool(OURS.match(os.path.basename(str(name or ""))))


def network() -> dict:
    """What vnetbench may change in the host's networking, cgroups and state, comparable with ==."""
    from vnetbench.topologies.thishost import cgroups as hierarchy

    links = [l for l in _json("ip", "-j", "link", "show") if _considered(l["ifname"])]
    # cgroups are the host's, in no namespace: where tests/harness/lanes.py cannot give its sandbox lane cgroups
    # of its own (v2) the VM folders seen there are the other lane's, which checks them
    cgroups = [] if os.environ.get(SANDBOX_LANE) else \
        sorted(str(p) for root in hierarchy.roots() for p in root.glob("vnb-*"))
    return {
        "interfaces": sorted((l["ifname"], l.get("master"), l.get("link_type"), "UP" in l.get("flags", []))
                             for l in links),
        "bridges": sorted(l["ifname"] for l in _json("ip", "-j", "link", "show", "type", "bridge")
                          if _considered(l["ifname"])),
        "namespaces": sorted(n for n in os.listdir("/run/netns") if _considered(n)) if os.path.isdir("/run/netns") else [],
        "qdiscs": sorted((q["dev"], q["kind"], q.get("handle"), q.get("parent", ""))
                         for q in _json("tc", "-j", "qdisc", "show") if _considered(q["dev"])),
        "addresses": sorted((a["ifname"], i["local"], i["prefixlen"]) for a in _json("ip", "-j", "addr", "show")
                            if _considered(a["ifname"]) for i in a.get("addr_info", [])),
        "routes": sorted(json.dumps(r, sort_keys=True) for r in _json("ip", "-j", "-4", "route", "show", "table", "all")
                         if _considered(r.get("dev"))),
        # /run/netns itself is ip's: the first `ip netns add` on a host bind-mounts it and ip keeps it for
        # good (so a fresh machine's first topology "adds" it); the namespaces' own mounts under it count
        "mounts": sorted(target for target in (line.split()[4] for line in open("/proc/self/mountinfo"))
                         if (_considered(target) or target.startswith("/run/vnetbench/"))
                         and target != "/run/netns"),
        "cgroups": cgroups,
        "states": _states(),
    }


def _states() -> list[str]:
    """The state root's entries, and each job's directory with its owner (who left it, when one is left)."""
    root = "/run/vnetbench"
    if not os.path.isdir(root):
        return []
    found = []
    for name in sorted(p for p in os.listdir(root) if not p.startswith(".")):
        found.append(name)
        if name == "jobs":
            for job in sorted(os.listdir(os.path.join(root, name))):
                try:
                    with open(os.path.join(root, name, job, "owner.json")) as owner:
                        found.append(f"jobs/{job}: {owner.read().strip()}")
                except OSError as exc:
                    found.append(f"jobs/{job}: no owner ({exc.strerror})")
    return found


def job_processes() -> list[str]:
    """'PID COMMAND' of every process that belongs to an MPI job or to a vnetbench command: inside a ``Watch``
    every process carrying its mark (the test's own, wherever they were reparented, whatever they run), else those
    of a job by name that no other pytest started."""
    mark = os.environ.get(MARK)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        # inside a Watch every process of the test's counts (an MPI job's ranks are whatever program it ran);
        # without one, those of a job by name that no other pytest started
        if _carries(int(entry.name), mark) if mark else \
                (JOB_PROCESS.match(comm) or JOB_COMMAND.search(cmdline)) and not _of_another_pytest(int(entry.name)):
            found.append(f"{entry.name} {cmdline[:200]}")
    return sorted(found)


def _carries(pid: int, mark: str) -> bool:
    """Whether process ``pid`` has the Watch's mark in its environment (as it was when it started)."""
    try:
        return f"{MARK}={mark}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _of_another_pytest(pid: int) -> bool:
    """Started by another pytest that is still running (a second test session on this machine, or the suite's
    second lane in its PID namespace: tests/harness/lanes.py), so none of this one's business; what a test
    leaves behind is reparented away from pytest."""
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"):
            return True
    except OSError:
        return False
    while pid > 1:
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid > 1 and ppid != os.getpid() and b"pytest" in Path(f"/proc/{ppid}/cmdline").read_bytes():
                return True
        except (OSError, ValueError, IndexError):
            return False
        pid = ppid
    return False


def temp_files() -> list[str]:
    """vnetbench's entries in the shared temporary places, and inside a ``Watch`` every entry of the test's own
    temporary folder (the TMPDIR of all it starts: what an MPI or a tool writes there is the test's)."""
    found = []
    for place in SHARED_TEMP:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        found += [f"{place}/{name}" for name in names if OUR_TEMP.match(name)]
    own = os.environ.get(MARK) and os.environ.get("TMPDIR")
    if own and os.path.isdir(own):
        found += [f"{own}/{name}" for name in os.listdir(own)]
    return sorted(found)


# Open MPI's shared-memory segments (5.x sm, 4.x vader) and the job directories vnetbench keeps them in
SEGMENT = re.compile(r"^(sm_segment|vader_segment)\.|^vnetbench-job-")


def shm_entries() -> set[str]:
    """The Open MPI segments and vnetbench segment directories in /dev/shm."""
    try:
        return {f"/dev/shm/{name}" for name in os.listdir("/dev/shm") if SEGMENT.match(name)}
    except OSError:
        return set()


def _in_use(path: str) -> bool:
    """Whether ``path`` belongs to a job that still runs: mapped by a live process (another session's
    ranks), or a vnetbench segment directory whose job's owner is alive."""
    name = os.path.basename(path)
    if name.startswith("vnetbench-job-"):
        from vnetbench.core.procs import start_time
        from vnetbench.core.rundir import state_root

        try:
            owner = json.loads((state_root() / "jobs" / name.removeprefix("vnetbench-job-") / "owner.json").read_text())
        except (OSError, ValueError):
            return False
        return start_time(owner.get("pid", -1)) == owner.get("start")
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and path in (entry / "maps").read_text():
                return True
        except OSError:
            continue
    return False


@contextlib.contextmanager
def shm_unchanged(timeout: float = 10.0):
    """Fails (after removing them) when /dev/shm gained segments no running job holds: a leak of
    the code under test, as other sessions' running jobs hold theirs."""
    import shutil
    import time

    before = shm_entries()
    yield
    deadline = time.monotonic() + timeout
    while True:
        left = sorted(path for path in shm_entries() - before if not _in_use(path))
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    described = []
    for path in left:
        try:
            described.append(f"{path} (modified {time.strftime('%H:%M:%S', time.localtime(os.stat(path).st_mtime))})")
        except OSError:
            continue  # went meanwhile
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else Path(path).unlink(missing_ok=True)
    assert not described, "left in /dev/shm: " + ", ".join(described)


def everything() -> dict:
    return {**network(), "processes": job_processes(), "temp_files": temp_files()}


def differences(before: dict, after: dict) -> dict:
    """{part: {"gone": [...], "new": [...]}} for each part that differs ({} when unchanged)."""
    out = {}
    for key in before:
        if before[key] != after.get(key):
            old, new = set(map(str, before[key])), set(map(str, after.get(key, [])))
            out[key] = {"gone": sorted(old - new), "new": sorted(new - old)}
    return out


def settle(check, timeout: float = 10.0, interval: float = 0.1) -> dict:
    """``everything()`` once ``check(snapshot)`` holds, or the last snapshot after ``timeout`` s
    (processes that were killed take a moment to be reaped)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        now = everything()
        if check(now) or time.monotonic() > deadline:
            return now
        time.sleep(interval)


class Watch:
    """A test's claim on the host: a mark every process it starts inherits and a temporary folder of its own
    (TMPDIR), then a snapshot of ``everything()``. ``leftovers()`` is what the test or vnetbench left (judged
    by names, mark and folder, never by a process's name alone); ``remove`` ends and removes exactly that.

        with hoststate.Watch() as watch:
            ...  # the test
            left = watch.leftovers()
    """

    def __enter__(self) -> "Watch":
        # (under pytest, settle its temporary tree first - tmp_path_factory.getbasetemp() - or a first tmp_path
        # asked for inside would be made in this folder, and go with it)
        self.token = secrets.token_hex(8)
        self.tmp = tempfile.mkdtemp(prefix="vnbtest-")
        self._saved = {key: os.environ.get(key) for key in (MARK, "TMPDIR")}
        self._tempdir = tempfile.tempdir
        os.environ.update({MARK: self.token, "TMPDIR": self.tmp})
        tempfile.tempdir = self.tmp
        self.before = everything()
        return self

    def leftovers(self, timeout: float = 10.0) -> dict:
        """{part: {"gone": [...], "new": [...]}} of what differs from the snapshot, once it settles (killed
        processes take a moment to be reaped) or after ``timeout`` s."""
        return differences(self.before, settle(lambda now: now == self.before, timeout))

    def remove(self, left: dict) -> None:
        """End and remove what ``left`` names: the test's processes, the topologies it left up (taken down by
        their source), crashed runs' topologies (plain ``topology cleanup``: never another's live one or one
        brought up with 'up') and vnetbench's or the test's temporary files."""
        for line in left.get("processes", {}).get("new", []):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        settle(lambda now: not set(now["processes"]) - set(self.before["processes"]), timeout=10)
        # and reaped, where the test started them itself: a zombie of ours would hold its topology ("in use by
        # process PID") for every test after it
        for line in left.get("processes", {}).get("new", []):
            with contextlib.suppress(ChildProcessError, ValueError):
                os.waitpid(int(line.split()[0]), os.WNOHANG)
        vnetbench = [sys.executable, "-m", "vnetbench"]
        for topology_id in left.get("states", {}).get("new", []):
            source = _source_of(topology_id)
            if source:
                subprocess.run([*vnetbench, "topology", "down", source], capture_output=True, timeout=120)
        if any(left.get(part, {}).get("new") for part in ("interfaces", "namespaces", "states", "mounts")):
            subprocess.run([*vnetbench, "topology", "cleanup"], capture_output=True, timeout=120)
        # what no state accounted for and cleanup did not know: vnetbench's names, new since the snapshot
        now = network()
        for name in set(now["bridges"] + [link[0] for link in now["interfaces"]]) - \
                set(self.before["bridges"] + [link[0] for link in self.before["interfaces"]]):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
        for name in set(now["namespaces"]) - set(self.before["namespaces"]):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        for path in left.get("temp_files", {}).get("new", []):
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else Path(path).unlink(missing_ok=True)

    def __exit__(self, *exc) -> None:
        for key, value in self._saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        tempfile.tempdir = self._tempdir
        shutil.rmtree(self.tmp, ignore_errors=True)


def _source_of(topology_id: str) -> str | None:
    """The ref or file a topology in the state root was brought up from (its state.json's "source")."""
    try:
        return json.loads(Path("/run/vnetbench", topology_id, "state.json").read_text()).get("source")
    except (OSError, ValueError):
        return None
