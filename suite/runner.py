"""Running one kernel configuration on a topology, repetition by repetition, into the store."""

import importlib
import shlex
import sys
from collections.abc import Callable

from . import jobs, kernels, launch, mpiselect, topologies
from .errors import UsageError
from .records import failure_record, new_run_id, now
from .store import Store, append_or_show


def prepare(kernel: str, params: dict | None, ranks: int) -> tuple[object, dict]:
    """The kernel module and its complete params; UsageError if they cannot run on ``ranks``."""
    module = kernels.get(kernel)
    full = {**kernels.defaults(kernel), **(params or {})}
    unknown = sorted(set(full) - set(kernels.defaults(kernel)))
    if unknown:
        raise UsageError(f"{unknown[0]}: not an option of kernel {kernel}")
    if ranks < module.MIN_RANKS:
        raise UsageError(f"--ranks: {kernel} needs at least {module.MIN_RANKS} ranks, got {ranks}")
    module.check(full, ranks)
    return module, full


def run_kernel(kernel: str, params: dict | None = None, ranks: int = 1, *, topology="native", repeat: int = 1,
               store: Store | str | None = None, timeout: float | None = None, bind: str | None = None,
               realised=None, on_record: Callable[[dict], None] | None = None,
               rank_options: dict | None = None, mpi: str | None = None) -> list[dict]:
    """Run ``kernel`` ``repeat`` times on ``ranks`` ranks; append each record to ``store``; return them.

    ``topology`` is a preset name, a YAML path or a loaded Topology; pass ``realised`` to reuse a
    topology that is already up (a sweep does). A failed or timed-out repetition is recorded,
    not raised; bad input raises UsageError before anything starts. ``rank_options`` holds
    mem_policy, allow_single_node and counters (see ``vnetbench.kernels.RANK_OPTIONS``). ``mpi`` is
    --mpi (auto, openmpi, mpich or a launcher's path; None: $VNETBENCH_MPI, else auto).
    """
    module, params = prepare(kernel, params, ranks)
    rank_options = check_rank_options(rank_options)
    if repeat < 1:
        raise UsageError(f"--repeat: {repeat} is out of range; allowed: >= 1")
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        store = Store(store)
    if store is not None:
        store.check_writable()
    timeout = timeout or module.default_timeout(params, ranks)
    launcher, _ = mpiselect.choose(mpi)  # before bring-up: no MPI, or one mpi4py cannot run under
    if realised is not None:
        return _repeat(realised, kernel, params, ranks, repeat, store, timeout, bind, on_record, rank_options,
                       launcher)
    topo = topologies.load(topology) if isinstance(topology, str) else topology
    check_vm_policies(topo, rank_options)
    batch = topologies.backend(topo.backend).batch(topo)
    if batch:  # a scheduler's batch job runs it (slurm outside an allocation)
        return importlib.import_module(batch).run(topo, kernel, params, ranks, repeat=repeat, timeout=timeout,
                                                  bind=bind, rank_options=rank_options, mpi=mpi, store=store,
                                                  on_record=on_record)
    with topologies.realise(topo) as up:
        return _repeat(up, kernel, params, ranks, repeat, store, timeout, bind, on_record, rank_options, launcher)


def check_rank_options(rank_options: dict | None) -> dict:
    from .kernels import RANK_OPTIONS, numa

    options = {key: value for key, value in (rank_options or {}).items() if value}
    unknown = sorted(set(options) - set(RANK_OPTIONS))
    if unknown:
        raise UsageError(f"{unknown[0]}: not a rank option; allowed: {', '.join(RANK_OPTIONS)}")
    numa.check_policy(options.get("mem_policy"), bool(options.get("allow_single_node")))
    return options


def check_vm_policies(topology, rank_options: dict) -> None:
    """A VM's memory_policy is refused where the host cannot honour it, as --mem-policy is."""
    from .kernels import numa

    for vm in getattr(topology, "vms", None) or ():
        policy = getattr(vm, "memory_policy", None)
        try:
            numa.check_policy(policy, bool(rank_options.get("allow_single_node")))
        except UsageError as exc:
            raise UsageError(f"topology {topology.name}: vms[{vm.name}].memory_policy: "
                             f"{str(exc).split(': ', 1)[1]}") from None


def _repeat(realised, kernel, params, ranks, repeat, store, timeout, bind, on_record, rank_options,
            launcher) -> list[dict]:
    spec = realised.launch(ranks, bind)
    return repetitions(repeat, lambda repetition: run_once(realised, spec, kernel, params, ranks, repetition, timeout,
                                                           rank_options, bind, launcher), store, on_record)


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


def run_once(realised, spec, kernel, params, ranks, repetition, timeout, rank_options=None,
             bind_requested=None, launcher=None) -> dict:
    """One repetition on a realised topology with a LaunchSpec from ``realised.launch``; the record."""
    run_id, started_at = new_run_id(), now()
    launcher = launcher or mpiselect.choose(None)[0]
    launch_info = {"mca": spec.mca, "notes": spec.notes, "timeout_s": timeout, "bind_requested": bind_requested,
                   "mpi": launcher.describe()}
    context = {
        "run_id": run_id,
        "repetition": repetition,
        "topology": realised.describe(),
        "expected_placement": spec.expected_placement,
        "placement_labels": spec.placement_labels,
        "launch": launch_info,
        **(rank_options or {}),
    }
    argv = launch.mpirun_argv(spec, launch.kernel_program(kernel, params, context), launcher)
    launch_info["command"] = shlex.join("{...}" if arg.startswith("{") else arg for arg in argv)
    common = dict(kernel=kernel, params=params, ranks=ranks, topology=realised.describe(), run_id=run_id,
                  repetition=repetition, started_at=started_at, launch=launch_info, run_options=rank_options or {})
    broken = realised.health()
    if broken:
        what, vms = broken
        return failure_record(status="failed", detail=f"{what}; the job was not started",
                              failure=_network_failure(vms, spec), **common)
    print(f"vnetbench: {kernel} x{ranks} on {realised.name} (repetition {repetition + 1})", file=sys.stderr)
    with jobs.Job(run_id, realised.health) as job:
        outcome = launch.execute(argv, launch.launcher_env(spec, launcher), timeout, job=job)
        failed = not outcome.records or outcome.returncode not in (0, 1)
        culprit = job.culprit(" ".join(outcome.stderr_tail)) if failed else None  # before the markers go
    if job.problem:
        return failure_record(status="failed", detail=f"{job.problem['detail']}; last stderr: {outcome.tail()}",
                              failure=_network_failure(job.problem["vms"], spec), **common)
    if outcome.timed_out:
        return failure_record(status="timeout", detail=f"no result after {timeout:g} s; the job was killed "
                              f"with its whole process tree; last stderr: {outcome.tail()}", **common)
    if not outcome.records:
        failure = _rank_failure(culprit, spec)
        who = f"{failure['detail']}; " if failure else ""
        return failure_record(status="failed", detail=f"{who}mpirun exited with {outcome.returncode} and no "
                              f"result record; last stderr: {outcome.tail()}", failure=failure, **common)
    record = outcome.records[-1]
    record["launch"] = launch_info
    worlds = sorted({other.get("ranks") for other in outcome.records}, key=str)
    if worlds != [ranks] or len(outcome.records) > 1:
        # the ranks did not join one world: a launcher and an MPI library that do not belong together
        # start N singletons, each "rank 0 of 1", each with a result of its own
        record["status"] = "failed"
        record["validation"] = {"passed": False, "detail": f"{kernel}'s ranks saw a world of "
                                f"{' and '.join(map(str, worlds))} rank(s) ({len(outcome.records)} result(s)), but "
                                f"{ranks} were launched with {launcher}", "kernel": record["validation"]}
        return record
    if outcome.returncode not in (0, 1) and record["status"] == "ok":
        # rank 0 wrote its result, then something else died: the run as a whole did not succeed
        failure = _rank_failure(culprit, spec)
        who = f"{failure['detail']}; " if failure else ""
        record["status"] = "failed"
        record["validation"] = {"passed": False, "detail": f"{who}mpirun exited with {outcome.returncode} after "
                                f"the result was written; last stderr: {outcome.tail()}",
                                "kernel": record["validation"]}
        record["failure"] = failure
    return record


def _where(rank: int, spec) -> str | None:
    """The VM (or host) the topology put ``rank`` on, or None when it does not say."""
    labels = spec.placement_labels or []
    return labels[rank].get("vm") if rank < len(labels) else None


def _rank_failure(culprit: dict | None, spec) -> dict | None:
    """The record's ``failure``: which rank brought the job down, on which VM, and how."""
    if not culprit:
        return None
    vm = _where(culprit["rank"], spec)
    how = culprit.get("how") or (f"was killed by {culprit['signal_name']}" if culprit.get("signal_name") else
                                 f"exited with {culprit['exit_code']}" if "exit_code" in culprit else
                                 "ended without finishing")
    where = f"VM {vm} ({culprit['host']})" if vm else f"host {culprit['host']}"
    when = f", {culprit['after_s']:.1f} s into the run" if "after_s" in culprit else ""
    detail = f"rank {culprit['rank']} on {where} {how}{when}, first of the job's ranks"
    return {"cause": "rank", **culprit, "vm": vm, "detail": detail}


def _network_failure(vms: list[str], spec) -> dict:
    labels = spec.placement_labels or []
    ranks = [rank for rank, label in enumerate(labels) if label.get("vm") in vms]
    return {"cause": "network", "vms": vms, "ranks": ranks}

