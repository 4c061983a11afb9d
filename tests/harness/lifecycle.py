"""The lifecycle every test harness of namespaces and daemons shares (SSH hosts, a Slurm cluster).

A harness is a context manager: ``start()`` checks the requirements, registers its tear-down with
atexit and on SIGTERM (a cancelled CI job sends it), picks a tag and a /24 no one on this host uses,
then ``bring_up()``; a failure while starting, leaving the context, the interpreter's exit or SIGTERM
runs every ``teardown_steps()`` step once, even when one of them fails, then ``remove_files()``, and
reports what could not be undone. Subclasses say what they make, not how they are torn down on a signal.
"""

import atexit
import ipaddress
import secrets
import signal
import subprocess
import threading
from typing import Callable


def run(argv: list[str], timeout: float = 20, check: bool = True, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def netns_names() -> list[str]:
    return [line.split()[0] for line in run(["ip", "netns", "list"], check=False).stdout.splitlines() if line]


def links() -> list[str]:
    out = run(["ip", "-o", "link", "show"], check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def netns_pids(name: str) -> list[int]:
    out = run(["ip", "netns", "pids", name], check=False).stdout
    return [int(pid) for pid in out.split() if pid.isdigit()]


def taken_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this host has an address in or a route to."""
    taken = [ipaddress.IPv4Interface(line.split()[3]).network
             for line in run(["ip", "-4", "-o", "addr", "show"]).stdout.splitlines()]
    for line in run(["ip", "-4", "route", "show", "table", "all"]).stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        if word[:1].isdigit():
            try:
                taken.append(ipaddress.IPv4Network(word, strict=False))
            except ValueError:
                pass
    return taken


class Lifecycle:
    """Start, tear down once whatever happens, on SIGTERM too. ``PREFIX`` starts the name of everything
    the harness makes, ``POOL`` holds the /24s it takes its network from, ``WHAT`` names it in errors."""

    PREFIX = ""
    POOL: ipaddress.IPv4Network | None = None
    WHAT = "test harness"

    def __init__(self):
        self.tag = ""
        self.network: ipaddress.IPv4Network | None = None
        self._old_sigterm = None
        self._closed = False

    # ---- what a harness says -------------------------------------------------------------------

    @staticmethod
    def missing_requirements() -> str | None:
        """Why this harness cannot run here, or None."""
        return None

    def bring_up(self) -> None:
        """Make everything, ``self.tag`` and ``self.network`` chosen."""
        raise NotImplementedError

    def teardown_steps(self) -> list[Callable[[], None]]:
        """The steps that undo ``bring_up`` (each runs even when an earlier one failed)."""
        raise NotImplementedError

    def remove_files(self) -> None:
        """Files and directories, once every process is gone."""

    # ---- the shared part -------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self) -> None:
        reason = self.missing_requirements()
        if reason:
            raise RuntimeError(f"cannot make {self.WHAT}: {reason}")
        atexit.register(self.close)
        self._catch_sigterm()
        self.tag = self._free_tag()
        self.network = self._free_network()
        self.bring_up()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)
        problems = []
        for step in self.teardown_steps():
            try:
                step()
            except Exception as exc:  # every step runs; report them all at the end
                problems.append(f"{step.__name__}: {exc}")
        self.remove_files()
        if problems:
            raise RuntimeError(f"{self.WHAT} tear-down: " + "; ".join(problems))

    def _catch_sigterm(self) -> None:
        # a cancelled CI job sends SIGTERM: unwind, so that finalizers tear the harness down
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            def terminate(signum, frame):
                raise SystemExit(128 + signum)

            self._old_sigterm = signal.signal(signal.SIGTERM, terminate)

    def _free_tag(self) -> str:
        existing = set(netns_names()) | set(links())
        while True:
            tag = secrets.token_hex(2)
            if not any(tag in name for name in existing if name.startswith(self.PREFIX)):
                return tag

    def _free_network(self) -> ipaddress.IPv4Network:
        taken = taken_networks()
        blocks = list(self.POOL.subnets(new_prefix=24))
        start = secrets.randbelow(len(blocks))
        for k in range(len(blocks)):
            block = blocks[(start + k) % len(blocks)]
            if not any(block.overlaps(net) for net in taken):
                return block
        raise RuntimeError(f"no free /24 in {self.POOL} for the {self.WHAT}")
