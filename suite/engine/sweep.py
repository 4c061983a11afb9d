"""Sweeps: one workload over topologies x rank counts x repetitions, planned up front, run one by one.

``plan`` checks every combination before anything starts and says which cannot run here and
why; ``execute`` brings each topology up once and keeps it up while the sweep runs, runs the jobs
through the engine alternating configurations (repetition 1 of every topology and rank count, then
repetition 2, ...: a slow drift of the machine, or other work for a while, spreads over every
configuration instead of landing on one), after ``warmup`` unrecorded runs of each configuration
before its first measured one (caches, JIT, neighbour tables: what a first run pays and no other),
appends each record to the store as soon as it exists (``Store.append`` is atomic), and tears the
topologies down at the end; a backend that runs batch jobs (``Backend.batch``) gets its runs all at
once instead. An interrupt propagates: finished runs are already stored, the run in flight leaves no
record, and ``--resume`` later runs exactly what is missing.
"""

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from vnetbench import engine, kernels, topologies, workloads
from vnetbench.mpi import selection as mpiselect
from vnetbench.core.errors import UsageError, VnetbenchError
from vnetbench.analysis.records import ConfigKey, bind_of, canonical, config_key
from vnetbench.core.store import Store, append_or_show
from vnetbench.topologies.base import BatchItem


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


@dataclass(frozen=True)
class PlannedRun:
    topology: str
    ranks: int
    repetition: int
    bind: str | None  # the binding the ranks will run with; None when only the backend, once up, knows

    def describe(self, kernel: str, repeat: int) -> str:
        return f"{kernel} x{self.ranks} on {self.topology}, repetition {self.repetition + 1}/{repeat}"


@dataclass
class Plan:
    workload: object  # workloads.Workload
    repeat: int
    bind: str | None = None
    run_options: dict = field(default_factory=dict)
    timeout: float | None = None
    topologies: dict = field(default_factory=dict)  # name -> loaded Topology, in sweep order
    jobs: list[PlannedRun] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (combination, why it cannot run here)
    done: list[dict] = field(default_factory=list)  # records already in the store (--resume)
    retried: int = 0  # runs in the store that did not pass and are run again
    launcher: object = None  # the flavours.Launcher every job runs with
    resume: bool = False
    warmup: int = 0  # unrecorded runs of each configuration before its first measured one
    profiling: object = None  # profile.Profiling when --profile asked for it

    @property
    def kernel(self) -> str:
        """The workload's name, as its records say it."""
        return self.workload.name

    @property
    def params(self) -> dict:
        return self.workload.params

    def key(self, job: PlannedRun) -> ConfigKey:
        # the topology as its records name it: a ref (a YAML path, qemu:REF) is not the topology's name
        loaded = self.topologies.get(job.topology)
        return ConfigKey(self.kernel, loaded.name if loaded is not None else job.topology, job.ranks,
                         canonical(self.params), job.bind, canonical(self.run_options))


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


def run_all(plan: Plan, store: Store, *, fail_fast: bool = False, on_bringup: Callable | None = None,
            on_start: Callable | None = None, on_finish: Callable | None = None,
            say: Callable[[str], None] | None = None) -> list[dict]:
    """Run the plan's jobs; every record is appended to ``store`` before the next job starts.

    A topology this sweep brought up that breaks under a run (a VM's veth deleted, an uplink
    set down) is taken down and brought up afresh before the next run; one it attached to is
    left alone, and the runs left on it fail, saying why. Runs on a backend that runs batch jobs
    are submitted all at once and collected as they end.
    """
    records, here, batches = [], [], {}  # batches: backend name -> (its Batch, its items)
    for job in plan.jobs:
        topo = plan.topologies[job.topology]
        batch = topologies.backend(topo.backend).batch(topo)
        if batch is None:
            here.append(job)
        else:
            batches.setdefault(topo.backend, (batch, []))[1].append(_item(plan, job, topo))
    if batches and plan.profiling is not None:
        raise UsageError(f"--profile: not yet with {', '.join(batches)}'s batch jobs; run inside an allocation")
    for batch, items in batches.values():
        records += batch.sweep(items, command=engine.BATCH_COMMAND, store=store, launcher=plan.launcher,
                               resume=plan.resume, on_start=_to_job(on_start), on_finish=_to_job(on_finish), say=say)
    # topology name -> its realised topology (False: it could not come up), its launch specs by rank count; the
    # configurations warmed up
    up, specs, warmed = {}, {}, set()
    try:
        for index, job in enumerate(here):
            name = job.topology
            realised = up.get(name)
            if realised is False:  # could not come up: its runs fail, saying why
                continue
            broken = realised.health() if realised is not None and realised.brought_up else None
            if broken:
                if say:
                    say(f"{name}: {broken[0]}; taking it down and bringing it up afresh")
                up.pop(name).close()
                realised = None
            if realised is None:
                if on_bringup:
                    on_bringup(name)
                specs[name] = {}
                try:
                    realised = up[name] = topologies.realise(plan.topologies[name])
                except VnetbenchError as exc:
                    up[name] = False
                    topology = {"name": name, "backend": plan.topologies[name].backend, "spec": None}
                    for left in [later for later in here[index:] if later.topology == name]:
                        record = _failure(plan, left, topology, f"{name} could not be brought up: {exc}")
                        if _finish(plan, store, left, record, records, on_finish) and fail_fast:
                            return records
                    continue
            if (name, job.ranks) not in warmed:
                warmed.add((name, job.ranks))
                _warm_up(plan, realised, specs[name], job, say)
            if on_start:
                on_start(job)
            record = _run(plan, realised, specs[name], job)
            if _finish(plan, store, job, record, records, on_finish) and fail_fast:
                return records
    finally:
        for realised in up.values():
            if realised:
                realised.close()
    return records


def _warm_up(plan: Plan, realised, specs: dict, job: PlannedRun, say: Callable[[str], None] | None) -> None:
    """``plan.warmup`` runs of ``job``'s configuration whose records are not kept: what a first run pays alone."""
    for index in range(plan.warmup):
        record = _run(plan, realised, specs, job, profiled=False)
        if say:
            detail = "" if record["status"] == "ok" else f": {record['validation'].get('detail', '')[:300]}"
            say(f"{plan.kernel} x{job.ranks} on {job.topology}, warm-up {index + 1}/{plan.warmup} "
                f"(not stored): {record['status']}{detail}")


def _item(plan: Plan, job: PlannedRun, topology) -> BatchItem:
    """``job`` as a batch job's run: one repetition, found again on --resume by its configuration and repetition."""
    request = engine.request(plan.workload, job.ranks, 1, timeout=plan.timeout, bind=plan.bind,
                             rank_options=plan.run_options, launcher=plan.launcher,
                             topology=engine.topology_ref(topology, job.topology))
    return BatchItem(topology=topology, request=request, ranks=job.ranks, repetition=job.repetition,
                     key=json.dumps([list(map(str, plan.key(job))), job.repetition]),
                     label=job.describe(plan.kernel, plan.repeat), job=job)


def _to_job(callback: Callable | None) -> Callable | None:
    """``callback`` told the sweep's PlannedRun, whether a Batch hands back the BatchItem or its job."""
    if callback is None:
        return None
    return lambda item, *rest: callback(item.job if isinstance(item, BatchItem) else item, *rest)


def _run(plan: Plan, up, specs: dict, job: PlannedRun, profiled: bool = True) -> dict:
    try:
        if job.ranks not in specs:
            specs[job.ranks] = up.launch(job.ranks, plan.bind)
        timeout = plan.timeout or plan.workload.default_timeout(job.ranks)
        return engine.run_once(plan.workload, up, specs[job.ranks], job.ranks, job.repetition, timeout,
                               plan.launcher, bind=plan.bind, rank_options=plan.run_options,
                               profiling=plan.profiling if profiled else None)
    except VnetbenchError as exc:  # the backend refused this rank count, or mpirun could not start
        return _failure(plan, job, up.describe(), f"could not launch: {exc}")


def _failure(plan: Plan, job: PlannedRun, topology: dict, detail: str) -> dict:
    return engine.failure(plan.workload, job.ranks, job.repetition, topology, detail, bind=job.bind,
                          rank_options=plan.run_options)


def _finish(plan, store, job, record, records, on_finish) -> bool:
    """Store the record, report it; True when it did not pass."""
    append_or_show(store, record)
    records.append(record)
    if on_finish:
        on_finish(job, record)
    return record["status"] != "ok"
