"""The one loop that brings topologies up for runs: ``run_all(plan, store)`` runs a plan's jobs on its topologies,
each brought up once and kept up while its jobs run, every record stored before the next job starts.

``sweep`` plans a sweep's jobs (topologies x rank counts x repetitions, alternated) and runs them here; ``run`` and
``exec`` run a plan of one configuration (``engine.run``, with ``strict``: bad ranks and a topology that cannot come
up raise, as a single run says them); ``calibrate`` a plan of several kernels on one topology (each job its own
workload). Plain classes and named tuples, not dataclasses: a run's start imports no dataclasses (vnetbench.cli says
why).
"""

import json
from collections import namedtuple

from vnetbench import topologies
from vnetbench.core.errors import UsageError, VnetbenchError
from vnetbench.core.store import append_or_show
from vnetbench.topologies.base import BatchItem

from .runs import BATCH_COMMAND, failure, request, run_once, topology_ref


class PlannedRun(namedtuple("PlannedRun", "topology ranks repetition bind workload", defaults=(None,))):
    """One job: ``topology`` (its name in the plan), ``ranks``, ``repetition``; ``bind`` the binding the ranks will
    run with (None when only the backend, once up, knows); ``workload`` its own where a plan runs several (a
    calibration's kernels), else None: the plan's."""

    __slots__ = ()

    def describe(self, kernel: str, repeat: int) -> str:
        return f"{kernel} x{self.ranks} on {self.topology}, repetition {self.repetition + 1}/{repeat}"


class Plan:
    """What ``run_all`` runs: ``workload`` ``repeat`` times a configuration, ``jobs`` (PlannedRun) on ``topologies``
    (name -> loaded Topology, in sweep order), with what ``sweep.plan`` found (``skipped``: (combination, why it
    cannot run here); ``done``: records already in the store, --resume; ``retried``: runs in the store that did not
    pass and run again). ``launcher``: the flavours.Launcher every job runs with; ``warmup``: unrecorded runs of each
    configuration before its first measured one; ``echo``: where an application's own output is shown (None:
    stderr); ``on_launch(argv, notes)``: told each run's launcher argv before it starts; ``profiling``:
    profile.Profiling when --profile asked for it."""

    def __init__(self, workload, repeat: int, bind: str | None = None, run_options: dict | None = None,
                 timeout: float | None = None, *, launcher=None, resume: bool = False, warmup: int = 0,
                 echo=None, on_launch=None, profiling=None):
        self.workload, self.repeat, self.bind, self.timeout = workload, repeat, bind, timeout
        self.run_options = {} if run_options is None else run_options
        self.topologies, self.jobs, self.skipped, self.done, self.retried = {}, [], [], [], 0
        self.launcher, self.resume, self.warmup = launcher, resume, warmup
        self.echo, self.on_launch, self.profiling = echo, on_launch, profiling

    @property
    def kernel(self) -> str:
        """The workload's name, as its records say it."""
        return self.workload.name

    @property
    def params(self) -> dict:
        return self.workload.params

    def key(self, job: PlannedRun):
        """The configuration key (``analysis.records.ConfigKey``) of ``job``'s records."""
        from vnetbench.analysis.records import ConfigKey, canonical

        # the topology as its records name it: a ref (a YAML path, qemu:REF) is not the topology's name
        loaded = self.topologies.get(job.topology)
        return ConfigKey(self.kernel, loaded.name if loaded is not None else job.topology, job.ranks,
                         canonical(self.params), job.bind, canonical(self.run_options))


def run_all(plan: Plan, store, *, fail_fast: bool = False, on_bringup=None, on_start=None, on_finish=None,
            say=None, strict: bool = False) -> list[dict]:
    """Run the plan's jobs; every record is appended to ``store`` (None: kept by the caller alone) before the next
    job starts. The one loop that brings topologies up for runs: ``sweep``, ``run``, ``exec`` and ``calibrate``
    reach it (``engine.run`` with a plan of one configuration).

    A topology this sweep brought up that breaks under a run (a VM's veth deleted, an uplink
    set down) is taken down and brought up afresh before the next run; one it attached to is
    left alone, and the runs left on it fail, saying why. Runs on a backend that runs batch jobs
    are submitted all at once and collected as they end. ``strict`` (one configuration, as ``run`` asks): a
    topology that cannot come up, or cannot place a job's ranks, raises instead of failing the runs left on it.
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
        records += batch.sweep(items, command=BATCH_COMMAND, store=store, launcher=plan.launcher,
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
                    if strict:
                        raise
                    up[name] = False
                    topology = {"name": name, "backend": plan.topologies[name].backend, "spec": None}
                    for left in [later for later in here[index:] if later.topology == name]:
                        record = _failure(plan, left, topology, f"{name} could not be brought up: {exc}")
                        if _finish(plan, store, left, record, records, on_finish) and fail_fast:
                            return records
                    continue
            if strict and job.ranks not in specs[name]:  # as run says it: bad ranks or a refused launch raise
                realised.check_ranks(job.ranks)
                specs[name][job.ranks] = realised.launch(job.ranks, plan.bind)
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


def _warm_up(plan: Plan, realised, specs: dict, job: PlannedRun, say) -> None:
    """``plan.warmup`` runs of ``job``'s configuration whose records are not kept: what a first run pays alone."""
    for index in range(plan.warmup):
        record = _run(plan, realised, specs, job, profiled=False)
        if say:
            detail = "" if record["status"] == "ok" else f": {record['validation'].get('detail', '')[:300]}"
            say(f"{plan.kernel} x{job.ranks} on {job.topology}, warm-up {index + 1}/{plan.warmup} "
                f"(not stored): {record['status']}{detail}")


def _item(plan: Plan, job: PlannedRun, topology) -> BatchItem:
    """``job`` as a batch job's run: one repetition, found again on --resume by its configuration and repetition."""
    asked = request(plan.workload, job.ranks, 1, timeout=plan.timeout, bind=plan.bind, rank_options=plan.run_options,
                    launcher=plan.launcher, topology=topology_ref(topology, job.topology))
    return BatchItem(topology=topology, request=asked, ranks=job.ranks, repetition=job.repetition,
                     key=json.dumps([list(map(str, plan.key(job))), job.repetition]),
                     label=job.describe(plan.kernel, plan.repeat), job=job)


def _to_job(callback):
    """``callback`` told the sweep's PlannedRun, whether a Batch hands back the BatchItem or its job."""
    if callback is None:
        return None
    return lambda item, *rest: callback(item.job if isinstance(item, BatchItem) else item, *rest)


def _run(plan: Plan, up, specs: dict, job: PlannedRun, profiled: bool = True) -> dict:
    try:
        if job.ranks not in specs:
            specs[job.ranks] = up.launch(job.ranks, plan.bind)
        workload = job.workload or plan.workload
        timeout = plan.timeout or workload.default_timeout(job.ranks)
        return run_once(workload, up, specs[job.ranks], job.ranks, job.repetition, timeout,
                               plan.launcher, bind=plan.bind, rank_options=plan.run_options,
                               profiling=plan.profiling if profiled else None, echo=plan.echo,
                               on_launch=plan.on_launch)
    except VnetbenchError as exc:  # the backend refused this rank count, or mpirun could not start
        return _failure(plan, job, up.describe(), f"could not launch: {exc}")


def _failure(plan: Plan, job: PlannedRun, topology: dict, detail: str) -> dict:
    return failure(job.workload or plan.workload, job.ranks, job.repetition, topology, detail, bind=job.bind,
                          rank_options=plan.run_options)


def _finish(plan, store, job, record, records, on_finish) -> bool:
    """Store the record, report it; True when it did not pass."""
    if store is not None:
        append_or_show(store, record)
    records.append(record)
    if on_finish:
        on_finish(job, record)
    return record["status"] != "ok"
