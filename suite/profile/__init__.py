"""vnetbench.profile: the MPI profiler behind ``--profile`` (summary) and ``--profile trace``.

- ``interposer.c``: the PMPI interposer, preloaded into every rank; built once with ``cc`` and cached by the
  hash of its source (``build``), header-free: one build serves every MPI (the file's head says how); each rank
  writes its summary (and its trace) into the job's folder at MPI_Finalize;
- ``preload``: the rank side: the interposer preloaded into the program's environment, then the program;
- ``collect``: after the job, the ranks' files as the record's bounded ``profile`` and the stored trace;
- ``trace``: the trace's format and its reader (``load``).

``prepare(mode, store)`` checks ``--profile`` and builds the interposer before anything starts (UsageError: exit
2); the engine hands the result (``Profiling``) to each run.
"""

from pathlib import Path

from vnetbench.core.errors import UsageError

MODES = ("summary", "trace")
SOURCE = Path(__file__).with_name("interposer.c")
FLAGS = ("-std=gnu17",)  # the wrappers call the real functions through unprototyped pointers
TRACE_CAP = 64 << 20  # bytes of events per rank; past it events are dropped and the trace marked truncated
CAP_ENV = "VNETBENCH_PROFILE_TRACE_CAP"  # overrides TRACE_CAP (tests use a small one)


class Profiling:
    """What ``--profile`` asked (``mode``), the built interposer (``shim``), the trace's cap per rank and the
    store a trace goes beside. A plain class, not a dataclass (``vnetbench.cli`` says why)."""

    def __init__(self, mode: str, shim: str, cap: int = 0, store=None):
        self.mode, self.shim, self.cap, self.store = mode, shim, cap, store

    def __repr__(self) -> str:
        return f"Profiling({vars(self)})"

    def rank_prefix(self) -> list[str]:
        """What a kernel's rank command is started through: the interposer preloaded, then the command."""
        import sys

        return [sys.executable, "-m", "vnetbench.profile.preload", self.token(), "--"]

    def token(self) -> str:
        """The interposer and the trace's cap (0: summary only) as one argument of the rank side."""
        return f"{self.cap}:{self.shim}"

    def describe(self) -> dict:
        import hashlib

        return {"path": self.shim, "source_sha256": hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16],
                "how": "LD_PRELOAD, PMPI"}


def check_mode(mode: str | None) -> None:
    if mode is not None and mode not in MODES:
        raise UsageError(f"--profile: {mode!r} is not a mode; allowed: {', '.join(MODES)} (or --profile alone: "
                         f"summary)")


def prepare(mode: str | None, store=None) -> Profiling | None:
    """The Profiling for ``--profile MODE`` (None: not asked), its interposer built; UsageError when the mode is
    unknown, a trace has no store to go beside, or the interposer cannot be built."""
    import os

    if mode is None:
        return None
    check_mode(mode)
    if mode == "trace" and store is None:
        raise UsageError("--profile trace: the trace is kept beside a results store; give --store")
    from vnetbench.core.shims import compile_cached

    shim, reason = compile_cached(SOURCE, "profile", "the MPI profiler's interposer", flags=FLAGS)
    if shim is None:
        raise UsageError(f"--profile: {reason}")
    cap = 0
    if mode == "trace":
        try:
            cap = int(os.environ.get(CAP_ENV) or TRACE_CAP)
        except ValueError:
            raise UsageError(f"{CAP_ENV}: {os.environ[CAP_ENV]!r} is not a number of bytes") from None
        if cap < 4096:
            raise UsageError(f"{CAP_ENV}: {cap} bytes; allowed: at least 4096")
    return Profiling(mode, shim, cap, None if store is None else str(getattr(store, "path", store)))


def check_program(program: str | None) -> None:
    """UsageError (exit 2, before anything starts) when ``program`` cannot be profiled by preloading: an ELF file
    linked statically (no program interpreter: the loader that would preload the interposer never runs). A script
    or a dynamic program passes; whether it calls MPI_Init is seen only by running it (the profile then says)."""
    from vnetbench.mpi.linkage import is_elf, which_program

    path = which_program(program) if program else None
    if not path or not is_elf(path):
        return
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with open(path, "rb") as handle:
            interpreted = any(segment["p_type"] == "PT_INTERP" for segment in ELFFile(handle).iter_segments())
    except (OSError, ELFError, ValueError):
        return
    if not interpreted:
        raise UsageError(f"--profile: {program} is linked statically: nothing can be preloaded into it, so its MPI "
                         f"calls cannot be seen (link it dynamically against its MPI)")


def check_backend(profiling: Profiling | None, backend, name: str) -> None:
    """UsageError when the ranks of a topology of ``backend`` (its class) cannot hand their profiles back: what they
    write into the job's folder is not on this host after the job (QEMU guests: their /run and /tmp are their own;
    real hosts: theirs)."""
    if profiling is not None and not getattr(backend, "ranks_write_this_hosts_files", False):
        raise UsageError(f"--profile: the ranks of {name} ({backend.__name__}) write their files where this host "
                         f"cannot read them after the job, so their profiles could not come back; profile natively "
                         f"or on emulated VMs (netns)")
