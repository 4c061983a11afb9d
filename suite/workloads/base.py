"""The workload contract: what the engine needs of anything it runs, and the run it hands back to judge.

A ``Workload`` says what it is in the records (``name``, ``params``), whether it can run (``check``,
``check_startable``, ``check_rank_options``), how long a run may take (``default_timeout``), what each rank
starts (``rank_argv``) and how a run's outcome becomes a record (``judge``, ``not_started``). The engine does
the rest the same way for every workload: launcher, job directory and watch, bounded capture, the timeout of
the whole process tree, the store. ``to_request``/``from_request`` carry a workload to a batch job as JSON.
"""

import contextlib
from abc import ABC, abstractmethod

from vnetbench.core.records import new_run_id, now


class Run:
    """One repetition, as the engine hands it to its workload: what was launched and what came of it.
    A plain class, not a dataclass (``vnetbench.cli`` says why)."""

    def __init__(self, realised, spec, ranks: int, repetition: int, timeout: float | None, launcher,
                 bind: str | None = None, rank_options: dict | None = None, echo=None):
        self.realised = realised  # the topology it ran on (topologies.Backend, realised)
        self.spec = spec  # the LaunchSpec the ranks were started with
        self.ranks, self.repetition, self.timeout = ranks, repetition, timeout
        self.launcher = launcher  # flavours.Launcher
        self.bind = bind  # --bind as asked (None: the backend's default)
        self.rank_options = {} if rank_options is None else rank_options
        self.echo = echo  # where a program's own output is shown (None: not shown)
        self.run_id: str = new_run_id()
        self.started_at: str = now()
        self.launch: dict = {}  # the record's ``launch``
        self.outcome = None  # launch.Outcome, once the job ended
        self.elapsed: float | None = None  # seconds the job ran
        self.culprit: dict | None = None  # the rank that brought the job down (jobs.Job.culprit), when it failed
        self.problem: dict | None = None  # why the job's watch stopped it ({"detail", "vms"}), or None
        self.seen: dict = {}  # what the workload kept of this run (its capture, its guard, ...)
        self.profiling = None  # profile.Profiling when --profile asked for it

    def __repr__(self) -> str:
        return f"Run({vars(self)})"

    def where(self, rank: int) -> str | None:
        """The VM (or host) the topology put ``rank`` on, or None when it does not say."""
        labels = self.spec.placement_labels or []
        return labels[rank].get("vm") if rank < len(labels) else None

    def rank_failure(self) -> dict | None:
        """The record's ``failure``: which rank brought the job down, on which VM, and how."""
        culprit = self.culprit
        if not culprit:
            return None
        vm = self.where(culprit["rank"])
        how = culprit.get("how") or (f"was killed by {culprit['signal_name']}" if culprit.get("signal_name") else
                                     f"exited with {culprit['exit_code']}" if "exit_code" in culprit else
                                     "ended without finishing")
        where = f"VM {vm} ({culprit['host']})" if vm else f"host {culprit['host']}"
        when = f", {culprit['after_s']:.1f} s into the run" if "after_s" in culprit else ""
        detail = f"rank {culprit['rank']} on {where} {how}{when}, first of the job's ranks"
        return {"cause": "rank", **culprit, "vm": vm, "detail": detail}

    def network_failure(self, vms: list[str]) -> dict:
        """The record's ``failure`` when the watch saw ``vms`` lose their network."""
        labels = self.spec.placement_labels or []
        ranks = [rank for rank, label in enumerate(labels) if label.get("vm") in vms]
        return {"cause": "network", "vms": vms, "ranks": ranks}


class Workload(ABC):
    """Something the engine runs: a kernel of ``vnetbench.kernels`` or an application definition."""

    kind = "abstract"  # its key in ``workloads.KINDS`` and in a request
    name: str  # the record's ``kernel``
    params: dict  # the record's ``params``
    # the program whose MPI chooses the launcher (mpiselect.choose); None: the kernels' own, through mpi4py
    program: str | None = None
    # rank 0 prints the result record on stdout (launch.execute collects it); False: stdout is the program's
    records_on_stdout = False

    # ---- before anything starts ------------------------------------------------------------

    def check(self, ranks: int) -> None:
        """Raise UsageError, naming the option, when the workload cannot run on ``ranks`` ranks."""

    def check_startable(self) -> None:
        """Raise UsageError when what it starts is not here (a program, an input)."""

    @abstractmethod
    def check_rank_options(self, options: dict | None) -> dict:
        """The rank options (``kernels.RANK_OPTIONS``: --mem-policy, --counters, ...) that are set, checked;
        UsageError naming the option when they cannot apply."""

    def default_timeout(self, ranks: int) -> float | None:
        """Seconds after which a run on ``ranks`` ranks is presumed hung, when --timeout is not given."""
        return None

    def ahead(self):
        """A context manager around the runs, entered once the input is known good, before the topology comes
        up: it may begin what ``rank_argv`` will read, so that it runs beside the launcher's own start, and
        ends what was not read when it exits."""
        return contextlib.nullcontext()

    # ---- one run --------------------------------------------------------------------------

    def prepare(self, run: Run) -> None:
        """Before the job starts (and before its clock): what the run needs ready."""

    def launch_fields(self, run: Run) -> dict:
        """What the workload adds to the record's ``launch`` (before the command is known)."""
        return {}

    @abstractmethod
    def rank_argv(self, run: Run) -> list[str]:
        """What each rank starts (after the launcher's own arguments)."""

    def profiled(self, run: Run, argv: list[str]) -> list[str]:
        """``argv`` (``rank_argv``'s) as a profiled run starts it (``run.profiling``): the profiler preloaded."""
        profiling = getattr(run, "profiling", None)
        return argv if profiling is None else [*profiling.rank_prefix(), *argv]

    def shown(self, argv: list[str]) -> str:
        """The launcher's argv as the record's ``launch.command`` shows it."""
        import shlex

        return shlex.join(argv)

    def passthrough(self, run: Run):
        """Where the job's stdout (other than records) goes: a file-like object, or None for stderr."""
        return None

    def observe(self, run: Run, job_dir) -> None:
        """After the job, before its directory goes: read what the ranks left there."""

    @abstractmethod
    def judge(self, run: Run) -> dict:
        """The record of a run that was started, whatever happened to it."""

    @abstractmethod
    def not_started(self, run: Run, what: str, vms: list[str]) -> dict:
        """The record of a run not started because the topology was broken (``what``, cutting off ``vms``)."""

    # ---- batch jobs -----------------------------------------------------------------------

    @abstractmethod
    def to_request(self) -> dict:
        """The workload as JSON for a batch job (``{"kind": ..., ...}``); ``from_request`` reads it back."""

    @classmethod
    @abstractmethod
    def from_request(cls, data: dict) -> "Workload":
        """The workload ``to_request`` wrote."""
