"""The one engine: runs any workload on a topology, repetition by repetition, into the store.

- ``run(workload, ranks, topology=...)``: load the topology and run the repetitions through the one loop that
  brings topologies up (``loop.run_all``, a sweep of one configuration), or hand the runs to its backend's
  ``Batch`` when it submits them as a scheduler's jobs; every record is stored before the next starts. Bad input
  raises UsageError before anything starts. ``exec`` (with and without --record) and ``calibrate`` run through
  it too;
- ``run_once(workload, realised, spec, ...)`` (engine/runs.py): one repetition on a topology that is up: the
  launcher's argv, the job's directory and watch (``jobs.Job``), bounded capture, the timeout of the whole process
  tree, and the record (the workload judges the outcome), or the failure record; a failed run is recorded, not
  raised;
- ``run_kernel(kernel, params, ranks, ...)``: ``run`` of a kernel by name (``vnetbench.run_kernel``);
- ``request(...)`` and ``BATCH_COMMAND`` (engine/runs.py): what a batch job is given (``vnetbench.engine.batchjob``
  runs it).
"""

import sys
from collections.abc import Callable

from .loop import Plan, PlannedRun, run_all
from .runs import BATCH_COMMAND, Ended, failure, request, run_once, topology_ref  # noqa: F401 (the engine's API)
from vnetbench import topologies
from vnetbench.mpi import selection as mpiselect
from vnetbench.core.errors import UsageError
from vnetbench.core.store import Store, append_or_show


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
