"""The README's test command's runner: the whole suite as two pytest sessions side by side, or one session.

    python -m tests.harness.lanes            # the suite, in two lanes where this host can isolate them
    python -m tests.harness.lanes ARGS...    # one plain pytest session with ARGS (a tier, a file, -k ...)

Why two lanes: the tiers whose real components are other machines (sshd hosts and Ansible, a Slurm cluster,
QEMU guests) spend most of their time waiting on those machines - SSH round trips, the scheduler, a guest's
boot under TCG - while the other tiers mostly compute. On a 2-core machine the suite run one test after
another leaves about half of the CPU idle; run side by side, the two halves take about as long as the longer.

Why a sandbox: the tiers check that the host is as they found it (tests/harness/hoststate.py: interfaces,
namespaces, state directories, processes, /tmp, /dev/shm). The second lane runs in network, mount and PID
namespaces of its own, with private /tmp, /var/tmp, /dev/shm, /run/netns and /run/vnetbench, so that each
lane's checks see its own objects and never the other's, and a leak in either is still found. cgroups
belong to no namespace: only the first lane, whose tiers make them, compares them. Without root
(or without unshare) the suite runs as one session, one test after another.

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
# the tiers that wait on other machines; the second lane runs them, in this order (the deploy tier last: the
# wheelhouse it installs from is made meanwhile, outside the sandbox, which has no route to PyPI)
AWAY = ("tests/guest", "tests/slurm", "tests/deploy")
WHEELHOUSE = ROOT / ".test-wheelhouse"
# each shared place -> its mode (as on a host: sticky world-writable temp places; vnetbench's state root is root's)
PRIVATE = {"/tmp": "1777", "/var/tmp": "1777", "/dev/shm": "1777", "/run/netns": "0755", "/run/vnetbench": "0700"}
# inside the sandbox: loopback up, a private tmpfs on each shared place, then pytest (PID 1 reaps orphans
# of its own tests, as init would)
SANDBOX = ["ip link set lo up"] + [f"mkdir -p {path} && mount -t tmpfs -o mode={mode} vnbtest-lane {path}"
                                   for path, mode in PRIVATE.items()]
# a checkout under one of those places (a clone in /tmp) is carried over: bound onto /mnt (this mount
# namespace's own) before the tmpfs hides it, then moved to its own path on the tmpfs
HOLD = "/mnt"


def sandbox_steps(root: Path) -> list[str]:
    under = [path for path in PRIVATE if root == Path(path) or Path(path) in root.parents]
    if not under:
        return SANDBOX
    quoted = shlex.quote(str(root))
    return [f"mount --bind {quoted} {HOLD}", *SANDBOX, f"mkdir -p {quoted} && mount --move {HOLD} {quoted}"]


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


def pytest(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


def sandboxed(argv: list[str]) -> list[str]:
    return ["unshare", "--net", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--",
            "sh", "-c", " && ".join(sandbox_steps(ROOT)) + f' && cd {shlex.quote(str(ROOT))} && exec "$@"', "sh", *argv]


def main(args: list[str]) -> int:
    os.chdir(ROOT)
    if args:
        return subprocess.call(pytest(args))
    why = can_isolate()
    if why:
        print(f"tests: one session, one test after another ({why})", file=sys.stderr, flush=True)
        return subprocess.call(pytest([]))
    log = ROOT / ".pytest-away.log"
    started = time.monotonic()
    print(f"tests: two lanes side by side - {', '.join(AWAY)} in a sandbox of their own (their output: {log}, "
          f"shown when both have ended), the other tiers here", file=sys.stderr, flush=True)
    sys.path.insert(0, str(ROOT / "tests"))
    from harness import ansible_run, hoststate

    making = threading.Thread(target=_quietly, args=(ansible_run.prepare, WHEELHOUSE), daemon=True)
    making.start()
    with open(log, "w") as out:
        away = subprocess.Popen(sandboxed(pytest(list(AWAY))), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env={**os.environ, ansible_run.PREPARED: str(WHEELHOUSE), hoststate.SANDBOX_LANE: "1"})
        try:
            here = subprocess.call(pytest([f"--ignore={tier}" for tier in AWAY]))
            away_code = away.wait()
        finally:
            if away.poll() is None:  # interrupted: end the other lane with this one
                away.terminate()
                try:
                    away.wait(60)
                except subprocess.TimeoutExpired:
                    away.kill()
    print(f"\n---- the second lane ({', '.join(AWAY)}), in its sandbox ----", flush=True)
    sys.stdout.write(log.read_text(errors="replace"))
    print(f"\ntests: both lanes ended in {time.monotonic() - started:.0f} s (exit {here} here, {away_code} in the "
          f"sandbox)", flush=True)
    return max(here, away_code)


def _quietly(function, *args) -> None:
    try:
        function(*args)
    except BaseException:  # noqa: BLE001 - prepare() left why for the tier, which fails saying it
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
