"""Rank side: ``python -m vnetbench.kernels KERNEL [options] [--record FILE]`` under any mpirun.

Every rank runs the kernel; rank 0 writes one result record (to FILE, or stdout). An
unhandled exception on any rank aborts the whole job (MPI_Abort) so that nothing hangs.
Under vnetbench, each rank first makes the mpi4py wheel load the MPI library that --mpi named
(``vnetbench.core.mpilib``, from the ``launch.mpi`` in its ``--context``) and checks, before MPI_Init,
that it did: a rank that loaded another fails the run, naming both.
Exit codes: 0 ok, 1 failed or invalid result, 2 bad options (nothing ran).
"""

import argparse
import json
import os
import sys
import time
import traceback

from vnetbench import kernels
from vnetbench.core.errors import UsageError
from vnetbench.core.options import ArgumentParser


REFUSAL_GRACE = 5.0  # seconds a rank other than 0 waits before it ends a job it refuses


def _world_rank_from_env() -> int:
    for var in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def _world_size_from_env(context: dict) -> int | None:
    """The launched world's size as the launcher tells it (before MPI_Init), else as the topology placed it."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(context.get("placement_labels") or []) or None


def _named_mpi(argv: list[str]) -> dict | None:
    """The ``launch.mpi`` of ``--context`` (what --mpi named), read before anything else is imported."""
    for i, arg in enumerate(argv):
        if arg == "--context" and i + 1 < len(argv):
            text = argv[i + 1]
        elif arg.startswith("--context="):
            text = arg.partition("=")[2]
        else:
            continue
        try:
            return (json.loads(text).get("launch") or {}).get("mpi")
        except (ValueError, AttributeError):
            return None
    return None


def parse(argv: list[str]):
    """(kernel module, kernel name, params, options) from the command line; UsageError if bad."""
    if not argv or argv[0].startswith("-"):
        raise UsageError(f"kernel: missing; choose from {', '.join(kernels.names())}")
    name = argv[0]
    kernel = kernels.get(name)
    parser = ArgumentParser(prog=f"python -m vnetbench.kernels {name}", description=kernel.DESCRIPTION)
    kernel.add_arguments(parser)
    parser.add_argument("--record", metavar="FILE", help="write the result record to FILE (default: stdout)")
    kernels.add_rank_options(parser)
    parser.add_argument("--params", metavar="JSON", help=argparse.SUPPRESS)
    parser.add_argument("--context", metavar="JSON", help=argparse.SUPPRESS)
    options = parser.parse_args(argv[1:])
    rank_options = {key: getattr(options, key) for key in kernels.RANK_OPTIONS}
    params = {key: value for key, value in vars(options).items()
              if key not in ("record", "params", "context", *kernels.RANK_OPTIONS)}
    if options.params:
        given = json.loads(options.params)
        unknown = sorted(set(given) - set(params))
        if unknown:
            raise UsageError(f"--params: unknown option {unknown[0]!r} for kernel {name}")
        params.update(given)
    resolve = getattr(kernel, "resolve", None)
    if resolve is not None:  # a direct launch's record says what ran, as one through the launcher does
        params = resolve(params)
    context = json.loads(options.context) if options.context else {}
    if "vnetbench_git" in context:
        from vnetbench.core.environment import source_problem

        problem = source_problem(context["vnetbench_git"])
        if problem:
            raise UsageError(f"--context: vnetbench_git: {problem}")
    for key, value in rank_options.items():  # options typed on a direct launch
        if value:
            context.setdefault(key, value)
    from vnetbench.kernels import numa

    numa.check_policy(context.get("mem_policy"), bool(context.get("allow_single_node")))
    return kernel, name, params, options.record, context


def write_record(record: dict, path: str | None) -> None:
    text = json.dumps(record, sort_keys=True, allow_nan=False)  # NaN is not JSON: fail loudly, not later
    if path is None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    # write then rename, so a reader never sees half a record
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def mark(rank: int, how: str | None = None) -> None:
    """Tell the launcher's watch that this rank started (``how`` None) or how it ended.

    Only under vnetbench (``VNETBENCH_JOB_DIR``) and only where the job's directory exists:
    on a host that does not share the launcher's files nothing is written.
    """
    folder = os.environ.get("VNETBENCH_JOB_DIR")
    if not folder or not os.path.isdir(os.path.join(folder, "ranks")):
        return
    import socket

    path = os.path.join(folder, "ranks", f"{rank}.end" if how else f"{rank}.json")
    data = {"how": how} if how else {"pid": os.getpid(), "host": socket.gethostname()}
    try:
        with open(f"{path}.tmp", "w") as handle:
            handle.write(json.dumps(data))
        os.replace(f"{path}.tmp", path)
    except OSError:
        pass  # the watch then knows less; the run itself is unaffected


def _mpi(selected: dict | None, problem: str | None, launcher: str | None):
    """(mpi4py's MPI module, initialised; the library as this rank loaded it, or None; the problem, or None):
    the library is checked before MPI_Init, so that a wrong one neither hangs nor joins a wrong world."""
    import mpi4py

    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = True
    if problem:
        return None, None, problem
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        return None, None, f"MPI library: mpi4py could not load it ({lines[-1]})"
    library = None
    if selected is not None:
        from vnetbench.core import mpilib

        library, problem = mpilib.check_loaded(selected, MPI.Get_library_version(), mpilib.mapped(), launcher)
        if problem:
            return MPI, library, problem
    if mpi4py.rc.threads:
        MPI.Init_thread(getattr(MPI, f"THREAD_{str(mpi4py.rc.thread_level).upper()}"))
    else:
        MPI.Init()
    return MPI, library, None


def _refuse(problem: str, MPI, library, name, params, record_path, context) -> int:
    """The run fails before MPI_Init: rank 0 writes the failure record, every rank says why on stderr."""
    import socket

    from vnetbench.core import environment
    from vnetbench.core import records

    rank = _world_rank_from_env()
    mark(rank)
    mark(rank, problem[:300])
    print(f"vnetbench.kernels: rank {rank} on {socket.gethostname()}: {problem}", file=sys.stderr, flush=True)
    if rank == 0:
        text = MPI.Get_library_version().strip() if MPI is not None else None
        record = records.failure_record(
            kernel=name, params=params, ranks=_world_size_from_env(context), status="failed", detail=problem,
            topology=context.get("topology"), run_id=context.get("run_id"),
            repetition=context.get("repetition", 0), launch=_launch(context, library),
            environment=environment.collect([socket.gethostname()], text, source_facts=context.get("vnetbench_git")),
            run_options={key: context.get(key) for key in kernels.RANK_OPTIONS if context.get(key)})
        write_record(record, record_path)
    else:
        # rank 0 writes the record, then its exit ends the job; a rank leaving first would end the job before
        # that (the launcher kills the rest). When rank 0 found no problem, this rank's exit ends it after this.
        time.sleep(REFUSAL_GRACE)
    return 1


def _launch(context: dict, library: dict | None) -> dict | None:
    """The record's ``launch`` with the MPI library as this rank loaded it."""
    launch = context.get("launch")
    if not library or not isinstance(launch, dict) or not isinstance(launch.get("mpi"), dict):
        return launch
    return {**launch, "mpi": {**launch["mpi"], "library": library}}


def run(kernel, name, params, record_path, context, selected=None, problem=None) -> int:
    launcher = ((context.get("launch") or {}).get("mpi") or {}).get("launcher")
    MPI, library, problem = _mpi(selected, problem, launcher)
    if problem:
        return _refuse(problem, MPI, library, name, params, record_path, context)

    from vnetbench.core import environment
    from vnetbench.core import records
    from vnetbench.kernels import placement as where

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    mark(rank)
    try:
        kernel.check(params, size)
    except UsageError as exc:
        if rank == 0:
            print(f"vnetbench.kernels: error: {exc}", file=sys.stderr)
        mark(rank, "refused its options")
        return 2
    try:
        labels = context.get("placement_labels") or []
        mine = where.here(rank)
        if library:
            mine["mpi_library"] = library["path"]  # each rank's own: hosts may install it in different places
        policy = (labels[rank].get("memory_policy") if rank < len(labels) else None) or context.get("mem_policy")
        if policy:
            from vnetbench.kernels import numa

            mine["memory"] = numa.apply(policy, mine["cpus"])
        probes = None
        if context.get("counters"):
            from vnetbench.kernels.counters import Counters

            probes = Counters()
        started_at = records.now()
        load_at_start = os.getloadavg()  # before the kernel adds its own load
        comm.Barrier()
        start = time.perf_counter()
        if probes:
            probes.start()
        result = kernel.run(comm, params)
        if probes:
            probes.stop()
            mine["counters"] = probes.result()
        duration = time.perf_counter() - start
        if policy:
            from vnetbench.kernels import numa

            mine["memory"]["pages_per_node"] = numa.pages_per_node()
        placement = comm.gather(mine, root=0)
        code = 0
        if rank == 0:
            metrics, validation = result
            misplaced = where.check_expected(placement, context.get("expected_placement"))
            if misplaced:
                validation = {"passed": False, "detail": "placement: " + "; ".join(misplaced),
                              "kernel": validation}
            env = environment.collect([p["hostname"] for p in placement], MPI.Get_library_version().strip(),
                                      load_at_start, source_facts=context.get("vnetbench_git"))
            record = records.make_record(
                kernel=name, params=params, ranks=size, metrics=metrics, validation=validation,
                placement=_merge_placement(placement, context.get("placement_labels")),
                environment=env, topology=context.get("topology"), run_id=context.get("run_id"),
                repetition=context.get("repetition", 0), started_at=started_at,
                run_options={key: context.get(key) for key in kernels.RANK_OPTIONS if context.get(key)},
                duration_s=duration, launch=_launch(context, library),
            )
            write_record(record, record_path)
            code = 0 if record["status"] == "ok" else 1
        code = comm.bcast(code, root=0)
        mark(rank, "finished")
        return code
    except Exception as exc:  # any rank failing must take the whole job down, never hang it
        sys.stderr.write(f"vnetbench.kernels: rank {rank} failed:\n{traceback.format_exc()}")
        sys.stderr.flush()
        mark(rank, f"raised {exc.__class__.__name__}: {exc}"[:300])
        comm.Abort(1)
        return 1


def _merge_placement(placement: list[dict], labels: list[dict] | None) -> list[dict]:
    """Add what the topology says of each rank (vm, switch, ...) beside what the rank saw."""
    if not labels:
        return placement
    return [{**label, **seen} for seen, label in zip(placement, labels)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # first of all: selecting the library may start this process again, which is cheapest before other imports
    from vnetbench.core import mpilib

    try:
        selected, problem = mpilib.select(_named_mpi(argv)), None
    except mpilib.SelectError as exc:
        selected, problem = None, str(exc)
    try:
        kernel, name, params, record_path, context = parse(argv)
    except UsageError as exc:
        if _world_rank_from_env() == 0:
            print(f"vnetbench.kernels: error: {exc}", file=sys.stderr)
        return 2
    return run(kernel, name, params, record_path, context, selected, problem)


if __name__ == "__main__":
    sys.exit(main())
