"""Starting one MPI job: the argv for mpirun, and running it with a timeout that kills the whole tree."""

import collections
import json
import os
import select
import signal
import subprocess
import sys
import threading

from vnetbench import mpi
from vnetbench.core import mpilib, procs
from vnetbench.core.records import SCHEMA_VERSION


def mpirun_argv(spec, program: list[str], launcher=None) -> list[str]:
    """The launcher's argv that carries out a backend's ``LaunchSpec``; the venv's mpirun by default."""
    if getattr(spec, "starter", None) is not None:  # the backend may start the ranks itself (srun under Slurm)
        from vnetbench.mpi import selection as mpiselect

        launcher = launcher or mpiselect.choose(None)[0]
        argv = spec.starter(launcher, program)
        if argv is not None:
            return argv
    if launcher is None:
        return [str(mpi.mpirun()), *spec.mpirun_args, *program]
    from . import jobs

    return launcher.command(spec.intent, program, forward=[jobs.ENV, "TMPDIR"])


def launcher_env(spec, launcher=None) -> dict:
    """The launcher's environment: vnetbench's (``mpi.run_env``) with what the backend and the flavour add, and
    what lets ranks on this host load the kernels' MPI library without starting again (``mpilib``)."""
    if launcher is None:
        return mpi.run_env(spec.env)
    env = mpi.run_env({**spec.env, **launcher.env(spec.intent)})
    try:
        env.update(mpilib.library_env(launcher.library, env))
    except OSError:
        pass  # the ranks link it themselves
    return env


class Outcome:
    """How a launch ended: the launcher's exit code, whether it timed out, the records rank 0 printed, the
    tail of stderr. A plain class, not a dataclass (``vnetbench.cli`` says why)."""

    def __init__(self, returncode: int | None, timed_out: bool = False, records: list[dict] | None = None,
                 stderr_tail: list[str] | None = None):
        self.returncode, self.timed_out = returncode, timed_out
        self.records = [] if records is None else records
        self.stderr_tail = [] if stderr_tail is None else stderr_tail

    def __repr__(self) -> str:
        return f"Outcome({vars(self)})"

    def tail(self, lines: int = 8) -> str:
        return " | ".join(line.strip() for line in self.stderr_tail[-lines:] if line.strip())


def _is_record(line: str):
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict) and value.get("schema_version") == SCHEMA_VERSION and "kernel" in value:
        return value
    return None


def _wait(proc: subprocess.Popen, timeout: float | None) -> int:
    """Popen.wait, woken by the exit itself (pidfd) rather than by polling every 50 ms."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return proc.wait()


def _die_with_parent():
    """A preexec_fn: the child gets SIGTERM when vnetbench dies, even of SIGKILL (mpirun then ends
    its job as on Ctrl-C), and does not start at all when vnetbench is already gone. It runs in the child
    between fork and exec while the launcher's reader and watch threads wait in the parent, so it takes no
    lock another thread could hold: no import, no I/O, a C call looked up beforehand."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, before the fork
    parent = os.getpid()

    def in_child():
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return in_child


# a program's output is read in pieces of at most these many characters (a whole line when it is shorter), so
# one endless line is passed on piece by piece, never held whole; a record line is far shorter than MAX_LINE
STDERR_PIECE = 64 << 10  # stderr's tail keeps 60 pieces


def execute(argv: list[str], env: dict, timeout: float | None, *, passthrough=None, echo_stderr=True,
            collect_records=True, job=None) -> Outcome:
    """Run mpirun in a session of its own; on timeout, interrupt or any exit kill whatever is left of it.

    stdout lines that are records are collected; other stdout goes to ``passthrough`` (default
    stderr, so that vnetbench's own stdout stays machine-readable). stderr is echoed to
    stderr and its tail kept for the failure record. With ``job`` (a ``jobs.Job`` that was
    entered) the job runs in the job's directory and under its watch.
    """
    passthrough = passthrough or sys.stderr
    outcome = Outcome(returncode=None)
    tail = collections.deque(maxlen=60)
    if job is not None:
        env = {**env, **job.env()}
    proc = None
    launched = threading.Event()  # set once mpirun was started (``proc``) or could not be (``proc`` None)

    def read_stdout():
        launched.wait()
        if proc is None:
            return
        # imported here, while mpirun starts: nothing else in a run on a preset needs its module
        from vnetbench.core.files import MAX_LINE

        for line in iter(lambda: proc.stdout.readline(MAX_LINE), ""):
            record = _is_record(line) if collect_records else None
            if record is not None:
                outcome.records.append(record)
            else:
                passthrough.write(line)
                passthrough.flush()

    def read_stderr():
        launched.wait()
        if proc is None:
            return
        for line in iter(lambda: proc.stderr.readline(STDERR_PIECE), ""):
            tail.append(line)
            if echo_stderr:
                sys.stderr.write(line)
                sys.stderr.flush()

    # started before mpirun, while the cores are free: a thread's start waits until it runs, and once mpirun
    # starts the launcher's own threads queue behind it for the cores (0.2 to 4.5 ms a start, measured)
    readers = [threading.Thread(target=read_stdout, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
    for reader in readers:
        reader.start()
    begin_watch = job.watch() if job is not None else None
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
                                preexec_fn=_die_with_parent())
    finally:
        launched.set()
    if begin_watch is not None:
        begin_watch(proc.pid)
    try:
        outcome.returncode = _wait(proc, timeout)
    except subprocess.TimeoutExpired:
        outcome.timed_out = True
    finally:
        if job is not None:
            job.stop()
        # ranks outlive a dead mpirun in their own process groups; the session finds them all
        procs.kill_session(proc.pid)
        if outcome.returncode is None:
            outcome.returncode = proc.wait()
        for reader in readers:
            reader.join(timeout=5)
        outcome.stderr_tail = list(tail)
    return outcome
