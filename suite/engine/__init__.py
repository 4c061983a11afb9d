"""The one engine: runs any workload on a topology, repetition by repetition, into the store.

- ``run(workload, ranks, topology=...)``: load the topology and run the repetitions through the one loop that
  brings topologies up (``loop.run_all``, a sweep of one configuration), or hand the runs to its backend's
  ``Batch`` when it submits them as a scheduler's jobs; every record is stored before the next starts. Bad input
  raises UsageError before anything starts. ``exec`` (with and without --record) and ``calibrate`` run through
  it too;
- ``run_once(workload, realised, spec, ...)``: one repetition on a topology that is up: the launcher's argv,
  the job's directory and watch (``jobs.Job``), bounded capture, the timeout of the whole process tree, and
  the record (the workload judges the outcome), or the failure record; a failed run is recorded, not raised;
- ``run_kernel(kernel, params, ranks, ...)``: ``run`` of a kernel by name (``vnetbench.run_kernel``);
- ``request(...)`` and ``BATCH_COMMAND``: what a batch job is given (``vnetbench.engine.batchjob`` runs it).
"""

import sys
import time
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

from . import jobs, launch
from vnetbench import topologies
from vnetbench.mpi import selection as mpiselect
from vnetbench.core import procs
from vnetbench.core.errors import UsageError
from vnetbench.core.records import failure_record
from vnetbench.core.store import Store, append_or_show

# what a batch job runs, with its request's path appended, on the job's first node
BATCH_COMMAND = [sys.executable, "-m", "vnetbench.engine.batchjob"]


def run(workload, ranks: int, *, topology="native", repeat: int = 1, store: Store | str | None = None,
        timeout: float | None = None, bind: str | None = None, mpi: str | None = None,
        rank_options: dict | None = None, realised=None, on_record: Callable[[dict], None] | None = None,
        echo=sys.stderr, submit: bool = True, profile: str | None = None,
        on_launch: Callable[[list[str], dict], None] | None = None) -> list[dict]:
    """Run ``workload`` ``repeat`` times on ``ranks`` ranks; append each record to ``store``; return them.

    ``topology`` is a ref (preset, YAML path, ``BACKEND:REF``) or a loaded topology; ``realised`` one that
    is up already (nothing is brought up or down). ``rank_options``: kernels.RANK_OPTIONS that are set.
    ``mpi`` is --mpi (None: $VNETBENCH_MPI, else auto). ``echo`` is where a program's own output is shown.
    With ``submit`` (the default) a backend that runs batch jobs (``Backend.batch``) gets the runs as one job.
    ``profile`` is --profile's mode (summary, trace; None: not profiled): each record gets a ``profile``.
    ``on_launch(argv, notes)`` is told each run's launcher argv and the launch's notes before it starts.
    A topology brought up here is brought up by the one loop, ``loop.run_all``, as a sweep of one configuration.
    """
    workload.check(ranks)
    rank_options = workload.check_rank_options(rank_options)
    workload.check_startable()
    if repeat < 1:
        raise UsageError(f"--repeat: {repeat} is out of range; allowed: >= 1")
    store = _store(store)
    from vnetbench import profile as profiler

    profiling = profiler.prepare(profile, store)  # the interposer built before anything starts
    if profiling is not None:
        profiler.check_program(workload.program)
    timeout = timeout or workload.default_timeout(ranks)
    launcher, _ = mpiselect.choose(mpi, workload.program)  # before bring-up: no MPI, or one that cannot fit
    options = dict(timeout=timeout, bind=bind, rank_options=rank_options, on_record=on_record, echo=echo,
                   profiling=profiling, on_launch=on_launch)
    if realised is not None:
        profiler.check_backend(profiling, type(realised), realised.name)
        with workload.ahead():
            return _repeat(workload, realised, ranks, repeat, store, launcher, **options)
    topo = topologies.load(topology) if isinstance(topology, str) else topology
    profiler.check_backend(profiling, topologies.backend(topo.backend), topo.name)
    check_vm_policies(topo, rank_options)
    batch = topologies.backend(topo.backend).batch(topo) if submit else None
    if batch is not None and profiling is not None:
        raise UsageError(f"--profile: not yet with {topo.backend}'s batch jobs; run inside an allocation")
    if batch is not None:  # a scheduler's job runs it (Slurm outside an allocation), its own run on its node
        asked = request(workload, ranks, repeat, timeout=timeout, bind=bind, rank_options=rank_options,
                        launcher=launcher, topology=topology_ref(topo, topology if isinstance(topology, str) else None))
        return batch.run(topo, asked, ranks, command=BATCH_COMMAND, store=store, launcher=launcher,
                         on_record=on_record)
    from .loop import Plan, PlannedRun, run_all

    plan = Plan(workload, repeat, bind, rank_options, timeout, launcher=launcher, profiling=profiling, echo=echo,
                on_launch=on_launch)
    plan.topologies[topo.name] = topo
    plan.jobs = [PlannedRun(topo.name, ranks, repetition, None) for repetition in range(repeat)]
    told = None if on_record is None else lambda _, record: on_record(record)
    with workload.ahead():
        return run_all(plan, store, strict=True, on_finish=told)


def run_kernel(kernel: str, params: dict | None = None, ranks: int = 1, **options) -> list[dict]:
    """Run ``kernel`` with ``params`` (its options; defaults fill the rest) on ``ranks`` ranks; the records
    (``vnetbench.run_kernel``, for scripts and notebooks).

    ``options`` are ``run``'s: topology, repeat, store, timeout, bind, mpi, rank_options (mem_policy,
    allow_single_node, counters), realised (a topology that is up), on_record. A failed or timed-out
    repetition is recorded, not raised; bad input raises UsageError before anything starts.
    """
    from vnetbench.workloads.kernel import KernelWorkload

    return run(KernelWorkload(kernel, params), ranks, **options)


def _store(store) -> Store | None:
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        store = Store(store)
    if store is not None:
        store.check_writable()
    return store


def _repeat(workload, realised, ranks, repeat, store, launcher, *, timeout, bind, rank_options, on_record,
            echo, profiling=None, on_launch=None) -> list[dict]:
    spec = realised.launch(ranks, bind)
    return repetitions(repeat, lambda repetition: run_once(
        workload, realised, spec, ranks, repetition, timeout, launcher, bind=bind, rank_options=rank_options,
        echo=echo, profiling=profiling, on_launch=on_launch), store, on_record)


def repetitions(repeat: int, once: Callable[[int], dict], store: Store | None,
                on_record: Callable[[dict], None] | None) -> list[dict]:
    """``once(repetition)`` for each repetition, each record stored (and shown) before the next starts."""
    out = []
    for repetition in range(repeat):
        record = once(repetition)
        if store is not None:
            append_or_show(store, record)
        if on_record:
            on_record(record)
        out.append(record)
    return out


def check_vm_policies(topology, rank_options: dict) -> None:
    """A VM's memory_policy is refused where the host cannot honour it, as --mem-policy is."""
    from vnetbench.kernels import numa

    for vm in getattr(topology, "vms", None) or ():
        policy = getattr(vm, "memory_policy", None)
        try:
            numa.check_policy(policy, bool(rank_options.get("allow_single_node")))
        except UsageError as exc:
            raise UsageError(f"topology {topology.name}: vms[{vm.name}].memory_policy: "
                             f"{str(exc).split(': ', 1)[1]}") from None


def run_once(workload, realised, spec, ranks: int, repetition: int, timeout: float | None, launcher, *,
             bind: str | None = None, rank_options: dict | None = None, echo=None, profiling=None,
             on_launch: Callable[[list[str], dict], None] | None = None) -> dict:
    """One repetition on ``realised`` with ``spec`` (from ``realised.launch``); the record, whatever happened.
    With ``profiling`` (``profile.prepare``) the ranks run under the profiler and the record gets ``profile``;
    ``on_launch(argv, notes)`` is told the launcher's argv and the launch's notes before it starts."""
    from vnetbench.workloads import Run

    run = Run(realised, spec, ranks, repetition, timeout, launcher, bind, rank_options or {}, echo)
    run.profiling = profiling
    workload.prepare(run)
    run.launch = {"mca": spec.mca, "notes": spec.notes, "timeout_s": timeout, "mpi": launcher.describe(),
                  **workload.launch_fields(run)}
    argv = launch.mpirun_argv(spec, workload.profiled(run, workload.rank_argv(run)), launcher)
    run.launch["command"] = workload.shown(argv)
    broken = realised.health()
    if broken:
        return workload.not_started(run, *broken)
    if on_launch:
        on_launch(argv, spec.notes)
    print(f"vnetbench: {workload.name} x{ranks} on {realised.name} (repetition {repetition + 1})", file=sys.stderr)
    ended = _execute(realised, spec, argv, launcher, timeout, run_id=run.run_id,
                     passthrough=workload.passthrough(run), records=workload.records_on_stdout,
                     observe=lambda job_dir: _observe(workload, run, job_dir))
    run.outcome, run.elapsed, run.culprit, run.problem = ended.outcome, ended.elapsed, ended.culprit, ended.problem
    run.launch["host_load"] = ended.load
    record = workload.judge(run)
    if profiling is not None:
        record["profile"] = run.seen.get("profile") or {
            "mode": profiling.mode, "status": "unavailable", "reason": "the job's folder was not read"}
    return record


def _observe(workload, run, job_dir) -> None:
    workload.observe(run, job_dir)
    if run.profiling is not None:
        from vnetbench.profile import collect

        run.seen["profile"] = collect.observe(run.profiling, job_dir, run.ranks, run.run_id)


class Ended(namedtuple("Ended", "outcome elapsed culprit problem load")):
    """How a job ended: the launcher's outcome (``launch.Outcome``), how long it ran, the rank that brought it
    down (when it failed), why the watch stopped it (None: it did not), and what other work used of the
    machine meanwhile (``procs.HostLoad.end``). A named tuple, not a dataclass (``vnetbench.cli`` says why)."""

    __slots__ = ()


def _execute(realised, spec, argv, launcher, timeout, *, run_id: str, passthrough, records: bool,
             observe: Callable | None = None) -> Ended:
    """The one place a job is started: in its own directory, under the watch, killed whole on timeout."""
    with jobs.Job(run_id, realised.health) as job:
        load = procs.HostLoad(realised.own_cpu_seconds)
        began = time.monotonic()
        outcome = launch.execute(argv, launch.launcher_env(spec, launcher), timeout, passthrough=passthrough,
                                 collect_records=records, job=job)
        elapsed = time.monotonic() - began
        loaded = load.end()
        failed = outcome.returncode != 0 or records and not outcome.records
        culprit = job.culprit(" ".join(outcome.stderr_tail)) if failed else None  # before the markers go
        if observe is not None:
            observe(job.path)
    return Ended(outcome, elapsed, culprit, job.problem, loaded)


def failure(workload, ranks: int, repetition: int, topology: dict, detail: str, *, bind: str | None = None,
            rank_options: dict | None = None) -> dict:
    """The record of a run that could not start (its topology did not come up, the launch was refused)."""
    return failure_record(kernel=workload.name, params=workload.params, ranks=ranks, status="failed", detail=detail,
                          topology=topology, repetition=repetition, launch={"notes": {"bind": bind}},
                          run_options=rank_options or {})


def topology_ref(topology, typed: str | None = None) -> str:
    """What loads ``topology`` again on a batch job's node: its own ref, else what was typed (a file made
    absolute), else its name."""
    ref = getattr(topology, "ref", None)
    if ref:
        return ref
    if typed and Path(typed).is_file():
        return str(Path(typed).resolve())
    return typed or topology.name


def request(workload, ranks: int, repeat: int, *, timeout, bind, rank_options: dict, launcher, topology: str) -> dict:
    """A batch job's request (the backend adds "store"); ``vnetbench.engine.batchjob`` runs it through ``run``."""
    return {"workload": workload.to_request(), "record": {"kernel": workload.name, "params": workload.params},
            "ranks": ranks, "repeat": repeat, "timeout": timeout, "bind": bind, "rank_options": rank_options,
            "mpi": launcher.path if launcher is not None else None, "topology": topology}
