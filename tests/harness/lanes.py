"""The README's test command's runner: the whole suite as two pytest sessions side by side, or one session.

    python -m tests.harness.lanes            # the suite, in two lanes where this host can isolate them
    python -m tests.harness.lanes ARGS...    # one plain pytest session with ARGS (a tier, a file, -k ...)

Why two lanes: the tiers whose real components are other machines (sshd hosts and Ansible, a Slurm cluster,
QEMU guests) wait on them - SSH round trips, the scheduler - or keep one core busy emulating them (a guest
under TCG), while each of the other tiers rarely keeps both cores busy. On a 2-core machine the suite run one
test after another leaves much of the CPU idle; run side by side, the lanes keep the machine 90% busy or more
(the table printed at the end says how much) and take about as long as the longer.

Why a sandbox: the tiers check that the host is as they found it (tests/harness/hoststate.py: interfaces,
namespaces, state directories, processes, /tmp, /dev/shm). The second lane runs in network, mount and PID
namespaces of its own, with private /tmp, /var/tmp, /dev/shm, /run/netns and /run/vnetbench, so that each
lane's checks see its own objects and never the other's, and a leak in either is still found (but for one
cache the product keeps on the host for good, carried in: the numba kernels its QEMU guests compiled). cgroups
belong to no namespace: the second lane runs in cgroups of its own, in which its VM folders nest. Without root
(or without unshare) the suite runs as one session, one test after another.

When both have ended it prints where the time went: each tier's wall time and the CPU its lane used meanwhile
(tests/harness/tiercost.py), the figure that says what a change to the suite saved on a CPU-bound machine; then
the dearest tests in that figure.

Exit code: the worse of the two sessions' (pytest's codes: 0 passed, 1 failed, 2+ could not run).
"""

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the tiers that wait on other machines, and the apps tier (LAMMPS: the lanes' balance); the second lane runs them,
# in this order (the deploy tier last: the wheelhouse it installs from is made meanwhile, outside the sandbox, which
# has no route to PyPI)
AWAY = ("tests/slurm", "tests/guest", "tests/apps", "tests/deploy")
# the first lane's tiers that go first, the others after them as pytest finds them. A lane that waits leaves a core
# idle unless the other keeps both busy: the Slurm tier mostly waits on the scheduler's timers (a third of a core,
# its minute and a half) and goes first, beside the mpi tier's 2-rank jobs (more than a core); the QEMU guests
# (more than a core) then meet the faults tier, which waits on the kills and timeouts it provokes
FIRST = ("tests/mpi", "tests/faults")
# and the unit tier, pure Python, is shared out: these of its files end the second lane, the others the first, so
# that both lanes end together. The first lane was the longer by 42 s, the unit tier (one core) running alone at its
# end, a core idle; these files are about 16 of its 45 CPU-s (ansible-inventory, which reads their inventories, most
# of it)
UNIT_AWAY = ("tests/unit/test_inventory.py", "tests/unit/test_inventory_ansible.py",
             "tests/unit/test_inventory_launch.py")
WHEELHOUSE = ROOT / ".test-wheelhouse"
# each lane's tiers as its pytest began them (tests/harness/tiercost.py), beside the checkout both lanes see
TIMELINES = {"here": ROOT / ".pytest-tiers-here.log", "sandbox": ROOT / ".pytest-tiers-sandbox.log"}
# and each test's CPU and wall seconds (tests/harness/tiercost.py), for the dearest tests' table at the end
COSTS = {lane: ROOT / f".pytest-costs-{lane}.log" for lane in TIMELINES}
# each shared place -> its mode (as on a host: sticky world-writable temp places; vnetbench's state root is root's)
PRIVATE = {"/tmp": "1777", "/var/tmp": "1777", "/dev/shm": "1777", "/run/netns": "0755", "/run/vnetbench": "0700"}
# inside the sandbox: loopback up, a private tmpfs on each shared place, then pytest (PID 1 reaps orphans
# of its own tests, as init would)
SANDBOX = ["ip link set lo up"] + [f"mkdir -p {path} && mount -t tmpfs -o mode={mode} vnbtest-lane {path}"
                                   for path, mode in PRIVATE.items()]
# a checkout under one of those places (a clone in /tmp) is carried over: bound onto /mnt (this mount
# namespace's own) before the tmpfs hides it, then moved to its own path on the tmpfs
HOLD = "/mnt"
# and so is one folder of the host's state root: the qemu backend's cache of numba's kernels compiled in guests
# (topologies/qemu/sshd.py), which the product keeps on the host for every guest after them, as numba keeps the
# host's beside the sources: without it each run compiles them again under TCG (tens of seconds a kernel)
KEPT = Path("/run/vnetbench/.cache/guest-numba")


def sandbox_steps(root: Path, hold: Path | None = None) -> list[str]:
    """The sandbox's set-up, with ``hold`` the empty folder the guests' numba cache is carried on (None: the
    sandbox starts without it). Carrying it is best effort: where it fails the lane runs, compiling again."""
    steps = list(SANDBOX)
    if hold is not None:
        held = shlex.quote(str(hold))
        steps = [f"{{ mount --bind {KEPT} {held} || echo 'tests: the sandbox lane starts without the numba cache "
                 f"of the guests' >&2; }}", *steps,
                 f"{{ ! mountpoint -q {held} || {{ mkdir -p {KEPT} && mount --move {held} {KEPT}; }} "
                 f"|| echo 'tests: the numba cache of the guests could not be carried in' >&2; }}"]
    under = [path for path in PRIVATE if root == Path(path) or Path(path) in root.parents]
    if not under:
        return steps
    quoted = shlex.quote(str(root))
    return [f"mount --bind {quoted} {HOLD}", *steps, f"mkdir -p {quoted} && mount --move {HOLD} {quoted}"]


def keep_guest_cache() -> Path | None:
    """The host's guest-numba folder made (as the product makes it), and a new empty folder of this run's to hold
    it on while the sandbox's tmpfs covers the state root; None (the sandbox starts without it) where they
    cannot be made."""
    import tempfile

    try:
        for folder in (KEPT.parent.parent, KEPT.parent):
            folder.mkdir(mode=0o755, exist_ok=True)
        KEPT.mkdir(mode=0o700, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="vnbtest-hold-", dir="/run"))
    except OSError as exc:
        print(f"tests: the sandbox lane starts without the guests' numba cache ({exc})", file=sys.stderr)
        return None


def hold_root_ssh() -> Path | None:
    """Root's ~/.ssh, made for the whole run when it is missing (the folder made; None: it was there). The sshd
    hosts (harness/sshd_hosts.py) bind-mount each host's own folder over it, so it must exist; a harness that
    had to make it removes it on close once no hosts of its own are left - but each lane sees only its own
    network namespaces, so one lane's harness removed it under the other lane's hosts, whose binds went with
    it (a host's key then went into root's real ~/.ssh). Made here, before either lane starts, no harness makes
    or removes it."""
    import pwd

    root_ssh = Path(pwd.getpwuid(0).pw_dir) / ".ssh"
    if root_ssh.exists():
        return None
    root_ssh.mkdir(mode=0o700)
    return root_ssh


def release_root_ssh(made: Path | None) -> None:
    if made is None:
        return
    try:
        made.rmdir()
    except OSError as exc:
        print(f"tests: {made}, made for the run, is left: {exc.strerror} (a test wrote into it)", file=sys.stderr)


def can_isolate() -> str | None:
    """Why the suite cannot run in two isolated lanes here, or None when it can."""
    if os.geteuid() != 0:
        return "not root: the second lane needs network, mount and PID namespaces"
    if not shutil.which("unshare") or not shutil.which("ip"):
        return "unshare (util-linux) or ip (iproute2) is missing"
    probe = subprocess.run(["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"namespaces are not available here ({probe.stderr.strip() or probe.returncode})"
    return None


def here_tiers() -> list[str]:
    """The first lane's tiers in the order it runs them: FIRST, then every other folder of tests/ that holds tests
    (a tier added later runs too), by name."""
    folders = sorted(f"tests/{path.parent.name}" for path in (ROOT / "tests").glob("*/test_*.py"))
    rest = [tier for tier in dict.fromkeys(folders) if tier not in AWAY and tier not in FIRST]
    return [tier for tier in FIRST if (ROOT / tier).is_dir()] + rest


def here_args() -> list[str]:
    """The first lane's pytest arguments: its tiers, without the unit tier's files the second lane runs."""
    return here_tiers() + [f"--ignore={path}" for path in away_unit()]


def away_args() -> list[str]:
    """The second lane's pytest arguments: its tiers, then its share of the unit tier."""
    return list(AWAY) + away_unit()


def away_unit() -> list[str]:
    """UNIT_AWAY's files that exist (one renamed or removed later leaves the first lane all of its tier)."""
    return [path for path in UNIT_AWAY if (ROOT / path).is_file()]


def pytest(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


def scratch_root() -> Path:
    """A new folder for a session's tmp_path folders (pytest's --basetemp). pytest's own, /tmp/pytest-of-USER, stays
    after every run with the last three sessions' files (hundreds of folders); this one goes when its session
    passes (``scratch_done``). Named as pytest's tree is, which the tests' host snapshots leave out (hoststate)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="pytest-of-lanes-"))


def scratch_done(folder: Path, code: int | None) -> None:
    """Remove the scratch folder of a session that passed or never ended (None: interrupted); keep a failed one's,
    for its failures' files, and say where."""
    if not code:
        shutil.rmtree(folder, ignore_errors=True)
    elif folder.exists():
        print(f"tests: the failed session's tmp_path folders are kept in {folder}", file=sys.stderr, flush=True)


# cgroups belong to no namespace: the sandbox lane runs in a cgroup of its own in each v1 hierarchy vnetbench
# nests VMs in, so that its VM folders (and its cleanup's search for orphans) are inside it and the first
# lane's are out of its sight, as each lane's are of the other's. Not "vnb-*": no topology's name.
LANE_CGROUP = "vnbtest-sandbox-lane"


def lane_cgroups() -> list[Path]:
    """The sandbox lane's cgroups, made (cpuset's with its parent's cpus and nodes); [] where vnetbench's
    VM folders are not v1 folders nested in this process's cgroups (v2: the lanes then share them)."""
    from vnetbench.topologies.thishost import cgroups

    if cgroups.mode() not in ("v1", "hybrid"):
        return []
    made = []
    for kind in cgroups.KINDS:
        root = cgroups.v1_root(kind)
        if root is None:
            continue
        folder = root / LANE_CGROUP
        try:
            folder.mkdir(exist_ok=True)
            if kind == "cpuset":
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (folder / name).write_text((root / name).read_text())
        except OSError as exc:
            print(f"tests: no cgroup of its own for the sandbox lane ({folder}: {exc.strerror})", file=sys.stderr)
            remove_lane_cgroups(made + [folder])
            return []
        made.append(folder)
    return made


def remove_lane_cgroups(folders: list[Path]) -> None:
    for folder in folders:
        for _ in range(50):  # the sandbox's last processes may take a moment to leave it
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            print(f"tests: {folder} is still in use; a lane left a process in it", file=sys.stderr)


def _joins(cgroups) -> list[str]:
    return [f"echo $$ > {shlex.quote(str(folder / 'cgroup.procs'))}" for folder in cgroups]


def sandboxed(argv: list[str], cgroups: list[Path] = (), hold: Path | None = None) -> list[str]:
    return ["unshare", "--net", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--",
            "sh", "-c", " && ".join(_joins(cgroups) + sandbox_steps(ROOT, hold)) + f' && cd {shlex.quote(str(ROOT))} '
            '&& exec "$@"', "sh", *argv]


def joined(argv: list[str], cgroups: list[Path]) -> list[str]:
    """``argv`` started in ``cgroups`` (each of its processes after it is in them too)."""
    return ["sh", "-c", " && ".join(_joins(cgroups)) + ' && exec "$@"', "sh", *argv] if cgroups else argv


def main(args: list[str]) -> int:
    os.chdir(ROOT)
    if args:
        return subprocess.call(pytest(args))
    why = can_isolate()
    if why:
        print(f"tests: one session, one test after another ({why})", file=sys.stderr, flush=True)
        scratch = scratch_root()
        code = subprocess.call(pytest([f"--basetemp={scratch}"]))
        scratch_done(scratch, code)
        return code
    log = ROOT / ".pytest-away.log"
    started = time.monotonic()
    print(f"tests: two lanes side by side - {', '.join(away_args())} in a sandbox of their own (their output: "
          f"{log}, shown when both have ended), the other tiers here", file=sys.stderr, flush=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from harness import ansible_run, hoststate, tiercost

    making = threading.Thread(target=_quietly, args=(ansible_run.prepare, WHEELHOUSE), daemon=True)
    making.start()
    cgroups = lane_cgroups()
    # without cgroups of its own the sandbox lane would see the other's VM folders: it leaves them unchecked
    shared = {} if cgroups else {hoststate.SANDBOX_LANE: "1"}
    hold = keep_guest_cache()
    root_ssh = hold_root_ssh()
    # where the time goes (tests/harness/tiercost.py): each lane's CPU, and when each of its tiers began
    meter = tiercost.Meter(list(TIMELINES))
    for path in (*TIMELINES.values(), *COSTS.values()):
        path.unlink(missing_ok=True)
    scratch = scratch_root()  # the here lane's (the sandbox lane's /tmp is a tmpfs of its own)
    here = None
    with open(log, "w") as out:
        away = subprocess.Popen(sandboxed(pytest(away_args()), cgroups + meter.folders("sandbox"), hold), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, ansible_run.PREPARED: str(WHEELHOUSE), **shared,
                                     tiercost.TIMELINE: str(TIMELINES["sandbox"]),
                                     tiercost.COSTS: str(COSTS["sandbox"])})
        try:
            here = subprocess.call(joined(pytest([f"--basetemp={scratch}", *here_args()]), meter.folders("here")),
                                   env={**os.environ, tiercost.TIMELINE: str(TIMELINES["here"]),
                                        tiercost.COSTS: str(COSTS["here"])})
            away_code = away.wait()
        finally:
            if away.poll() is None:  # interrupted: end the other lane with this one
                away.terminate()
                try:
                    away.wait(60)
                except subprocess.TimeoutExpired:
                    away.kill()
            meter.stop()
            scratch_done(scratch, here)
            remove_lane_cgroups(cgroups + list(meter.groups.values()))
            release_root_ssh(root_ssh)
            if hold is not None:
                try:
                    hold.rmdir()
                except OSError:
                    pass
    print(f"\n---- the second lane ({', '.join(AWAY)} and {len(away_unit())} files of tests/unit), in its sandbox "
          f"----", flush=True)
    sys.stdout.write(log.read_text(errors="replace"))
    print(f"\ntests: both lanes ended in {time.monotonic() - started:.0f} s (exit {here} here, {away_code} in the "
          f"sandbox)", flush=True)
    print(meter.table(lines_of(TIMELINES)), flush=True)
    dearest = tiercost.dearest(lines_of(COSTS))
    if dearest:
        print(dearest, flush=True)
    return max(here, away_code)


def lines_of(files: dict[str, Path]) -> dict[str, list[str]]:
    """lane -> the lines its file holds ([] where the lane wrote none)."""
    return {lane: path.read_text().splitlines() if path.exists() else [] for lane, path in files.items()}


def _quietly(function, *args) -> None:
    try:
        function(*args)
    except BaseException:  # noqa: BLE001 - prepare() left why for the tier, which fails saying it
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
