"""Sweeps: one workload over topologies x rank counts x repetitions, planned up front, run one by one.

``plan`` checks every combination before anything starts and says which cannot run here and
why; ``run_all`` (the one loop, engine/loop.py, which run, exec and calibrate reach too) brings each topology
up once and keeps it up while the sweep runs, runs the jobs
through the engine alternating configurations (repetition 1 of every topology and rank count, then
repetition 2, ...: a slow drift of the machine, or other work for a while, spreads over every
configuration instead of landing on one), after ``warmup`` unrecorded runs of each configuration
before its first measured one (caches, JIT, neighbour tables: what a first run pays and no other),
appends each record to the store as soon as it exists (``Store.append`` is atomic), and tears the
topologies down at the end; a backend that runs batch jobs (``Backend.batch``) gets its runs all at
once instead. An interrupt propagates: finished runs are already stored, the run in flight leaves no
record, and ``--resume`` later runs exactly what is missing.
"""

from collections import Counter
from dataclasses import dataclass

from vnetbench import kernels, topologies, workloads
from vnetbench.mpi import selection as mpiselect
from vnetbench.core.errors import UsageError
from vnetbench.analysis.records import ConfigKey, bind_of, config_key
from vnetbench.core.store import Store

from .loop import Plan, PlannedRun, run_all  # noqa: F401 (run_all: the sweep's jobs run there)


@dataclass(frozen=True)
class Request:
    """What a sweep was asked for, once a study's defaults and the explicit options are merged."""

    study: object  # studies.Study
    workload: object  # workloads.Workload
    topologies: list[str]
    ranks: list[int]
    repeat: int

    @property
    def kernel(self) -> str:
        return self.workload.name

    @property
    def params(self) -> dict:
        return self.workload.params


def kernel_of(study: str | None, kernel: str | None) -> str:
    """The kernel a sweep runs: ``kernel``, else the study's (default quick); UsageError for an unknown one."""
    from vnetbench.engine import studies

    kernel = kernel or studies.get(study or "quick").kernel
    if kernel not in kernels.names():
        raise UsageError(f"--kernel: unknown kernel {kernel!r}; choose from {', '.join(kernels.names())}")
    return kernel


def settle(study: str | None = None, kernel: str | None = None, topologies: list[str] | None = None,
           ranks: list[int] | None = None, repeat: int | None = None, kernel_argv: list[str] = (),
           app: str | None = None) -> Request:
    """The study (default quick) with the explicit options over it. The study's kernel options apply
    when its kernel is the one run; ``kernel_argv`` (as typed after ``run KERNEL``) goes over them.
    With ``app`` (a definition's path) the application runs instead, on the study's matrix."""
    from vnetbench.engine import studies

    base = studies.get(study or "quick")
    name = kernel_of(study, kernel)
    workload = workloads.chosen(app, name, kernel_argv, defaults=base.kernel_argv if name == base.kernel else [],
                                typed=kernel and f"--kernel {kernel}")
    return Request(base, workload, topologies or base.topologies, ranks or base.ranks, repeat or base.repeat)


def failures(records: list[dict]) -> Counter:
    """How many records did not pass, by status (in the order first met)."""
    return Counter(record["status"] for record in records if record["status"] != "ok")


def plan(workload, topology_names: list[str], rank_counts: list[int], repeat: int, *, bind: str | None = None,
         run_options: dict | None = None, timeout: float | None = None, store: Store | None = None,
         resume: bool = False, optional_topologies: bool = False, mpi: str | None = None, warmup: int = 0,
         profile: str | None = None) -> Plan:
    """Every job of the sweep, with the combinations that cannot run and why; UsageError when none can.

    Topologies that do not load are bad input (UsageError) unless ``optional_topologies``;
    topologies this host cannot realise (no root, no netns) are skipped and reported.
    """
    if repeat < 1:
        raise UsageError(f"--repeat: {repeat} is out of range; allowed: >= 1")
    if warmup < 0:
        raise UsageError(f"--warmup: {warmup} is out of range; allowed: >= 0")
    run_options = workload.check_rank_options(run_options)
    why_not = {}
    for ranks in rank_counts:
        try:
            workload.check(ranks)
            why_not[ranks] = None
        except UsageError as exc:
            why_not[ranks] = str(exc)
    if why_not and all(why_not.values()):
        raise UsageError(next(iter(why_not.values())))
    workload.check_startable()
    from vnetbench import profile as profiler

    result = Plan(workload, repeat, bind, run_options, timeout, resume=resume, warmup=warmup,
                  profiling=profiler.prepare(profile, store))
    result.launcher = mpiselect.choose(mpi, workload.program)[0]
    for name in topology_names:
        try:
            topo = topologies.load(name)
            backend = topologies.backend(topo.backend)
            backend.check_launcher(topo, result.launcher)  # e.g. srun without the MPI's PMI: before anything starts
            profiler.check_backend(result.profiling, backend, name)
        except UsageError as exc:
            if not optional_topologies:
                raise UsageError(f"--topologies: {name}: {exc}") from None
            result.skipped.append((f"{name} (all rank counts)", str(exc)))
            continue
        try:
            backend.preflight(topo)
        except UsageError as exc:  # about this host (no root, no tools), not about what was typed
            result.skipped.append((f"{name} (all rank counts)", str(exc)))
            continue
        result.topologies[name] = topo
        runnable = []
        for ranks in rank_counts:
            why = why_not[ranks] or backend.cannot_place(topo, ranks)
            if not why:
                try:
                    expect = backend.planned_bind(topo, ranks, bind)
                except UsageError as exc:
                    why = str(exc)
            if why:
                result.skipped.append((f"{result.kernel} x{ranks} on {name}", why))
            else:
                runnable.append((ranks, expect))
        result.jobs += [PlannedRun(name, ranks, rep, expect) for rep in range(repeat) for ranks, expect in runnable]
    # repetitions outermost, over every topology: slow drift of the machine spreads over every configuration
    order = {name: index for index, name in enumerate(result.topologies)}
    result.jobs.sort(key=lambda job: (job.repetition, order[job.topology], job.ranks))
    if not result.jobs:
        reasons = "; ".join(f"{what}: {why}" for what, why in result.skipped) or "nothing was asked for"
        raise UsageError(f"nothing in this sweep can run here: {reasons}")
    if resume and store is not None and store.path.exists():
        _drop_done(result, store)
    return result


def _slot(key: ConfigKey, repetition: int) -> tuple[ConfigKey, int]:
    return key._replace(bind=None), repetition  # without bind, which may be unknown until bring-up


def _drop_done(result: Plan, store: Store) -> None:
    records, _ = store.scan()
    passed, failed = {}, set()
    for record in records:
        slot = _slot(config_key(record), record["repetition"])
        if record["status"] == "ok":
            passed.setdefault(slot, []).append(record)
        else:
            failed.add(slot)
    remaining = []
    for job in result.jobs:
        slot = _slot(result.key(job), job.repetition)
        found = [r for r in passed.get(slot, []) if job.bind is None or bind_of(r) == job.bind]
        if found:
            result.done.append(found[0])
        else:
            result.retried += slot in failed
            remaining.append(job)
    result.jobs = remaining
