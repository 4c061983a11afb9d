"""One run's pieces, below the loop (engine/loop.py) and ``engine.run``: ``run_once`` - one repetition on a topology
that is up (the launcher's argv, the job's directory and watch, bounded capture, the timeout of the whole process
tree, the record: the workload judges the outcome; a failed run is recorded, not raised) - and ``_execute``, the one
place a job is started; ``failure``, the record of a run that could not start; and what a batch job is given
(``request``, ``topology_ref``, ``BATCH_COMMAND``: ``vnetbench.engine.batchjob`` runs it).
"""

import sys
import time
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

from . import jobs, launch
from vnetbench.core import procs
from vnetbench.core.records import failure_record

# what a batch job runs, with its request's path appended, on the job's first node
BATCH_COMMAND = [sys.executable, "-m", "vnetbench.engine.batchjob"]


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
