"""Running an application definition on a topology, repetition by repetition, into the store.

The program runs under the rank-side wrapper (placement from inside each rank, then exec) with
the world-size guard preloaded (worldsize.py): ranks that joined a world other than the one
launched fail the run, and the MPI library they loaded goes into the record's environment. Its
stdout is kept with a bound (output.py) and read after the run: the success pattern, the parser,
the regex metrics. A run that fails, is killed, times out or lacks what it declared is recorded
with its status and the reason, never as a success.
"""

import re
import shlex
import sys
import time
from collections.abc import Callable

from vnetbench import jobs, launch, mpiselect, topologies
from vnetbench.errors import UsageError
from vnetbench.records import make_record, new_run_id, now
from vnetbench.store import Store

from . import parsers, worldsize, wrapper
from .model import App
from .output import TAIL_CHARS, Capture, last_lines

TAIL_LINES = 20  # of the output, kept in the record

def run_app(app: App, ranks: int, *, topology="native", repeat: int = 1, store: Store | str | None = None,
            timeout: float | None = None, bind: str | None = None, mpi: str | None = None, realised=None,
            on_record: Callable[[dict], None] | None = None, echo=sys.stderr) -> list[dict]:
    """Run ``app`` ``repeat`` times on ``ranks`` ranks; append each record to ``store``; return them.

    Bad input (a missing program, an unreadable input, a store that cannot be written, a launcher
    that does not fit the program) raises UsageError before anything starts.
    """
    if repeat < 1:
        raise UsageError(f"--repeat: {repeat} is out of range; allowed: >= 1")
    app.check_startable()
    if isinstance(store, str) or hasattr(store, "__fspath__"):
        store = Store(store)
    if store is not None:
        store.check_writable()
    timeout = timeout or app.spec.timeout
    launcher, _ = mpiselect.choose(mpi, app.program())
    if realised is not None:
        return _repeat(app, realised, ranks, repeat, store, timeout, bind, launcher, on_record, echo)
    topo = topologies.load(topology) if isinstance(topology, str) else topology
    with topologies.realise(topo) as up:
        up.check_ranks(ranks)
        return _repeat(app, up, ranks, repeat, store, timeout, bind, launcher, on_record, echo)


def _repeat(app, realised, ranks, repeat, store, timeout, bind, launcher, on_record, echo) -> list[dict]:
    from vnetbench.runner import repetitions

    spec = realised.launch(ranks, bind)
    return repetitions(repeat, lambda repetition: run_once(app, realised, spec, ranks, repetition, timeout, launcher,
                                                           echo), store, on_record)


def run_once(app: App, realised, spec, ranks: int, repetition: int, timeout, launcher, echo) -> dict:
    """One repetition on a realised topology; the record, whatever happened."""
    run_id, started_at = new_run_id(), now()
    guard = worldsize.build()  # compiled once per user and source, before the clock starts
    argv = launch.mpirun_argv(spec, wrapper.command(app.argv(), app.spec.env, guard.path), launcher)
    launch_info = {"mca": spec.mca, "notes": spec.notes, "timeout_s": timeout, "mpi": launcher.describe(),
                   "command": shlex.join(argv)}
    common = dict(app=app, ranks=ranks, realised=realised, run_id=run_id, repetition=repetition,
                  started_at=started_at, launch=launch_info)
    broken = realised.health()
    if broken:
        return _record(status="failed", detail=f"{broken[0]}; the program was not started", **common)
    print(f"vnetbench: {app.name} x{ranks} on {realised.name} (repetition {repetition + 1})", file=sys.stderr)
    capture = Capture(echo)
    with jobs.Job(run_id, realised.health) as job:
        began = time.monotonic()
        outcome = launch.execute(argv, launch.launcher_env(spec, launcher), timeout, passthrough=capture,
                                 collect_records=False, job=job)
        elapsed = time.monotonic() - began
        culprit = job.culprit(" ".join(outcome.stderr_tail)) if outcome.returncode != 0 else None
        placement = wrapper.read_placement(job.path, ranks)
        world = worldsize.judge(guard, worldsize.read(job.path), ranks, launcher)
    output = capture.text()
    common.update(elapsed=elapsed, output=output, outcome=outcome, placement=_labelled(placement, spec),
                  world=world)
    if job.problem:
        return _record(status="failed", detail=job.problem["detail"], **common)
    if outcome.timed_out:
        return _record(status="timeout", detail=f"no exit after {timeout:g} s; the job was killed with its whole "
                       f"process tree", **common)
    if world.problem:
        # a launcher and an MPI library that do not belong together: N singletons, each exiting 0
        how = f"; {app.spec.command[0]} exited with status {outcome.returncode}" if outcome.returncode else ""
        return _record(status="failed", detail=f"{world.problem}{how}", **common)
    if outcome.returncode != 0:
        who = f"{culprit['detail'] if 'detail' in culprit else _culprit_text(culprit)}; " if culprit else ""
        how = (f"was killed by signal {-outcome.returncode}" if outcome.returncode < 0
               else f"exited with status {outcome.returncode}")
        return _record(status="failed", detail=f"{who}{app.spec.command[0]} {how}; last stderr: {outcome.tail()}",
                       **common)
    metrics, problems = read_output(app, output + "".join(outcome.stderr_tail))
    common["metrics"] = metrics
    problems += _placement_problems(common["placement"], ranks, spec)
    unread = capture.notes() + world.notes
    if problems:
        return _record(status="invalid", detail="; ".join(problems + unread), **common)
    return _record(status="ok", detail="; ".join([f"exit 0; {_checked(app)}", *unread]), **common)


def read_output(app: App, output: str) -> tuple[dict, list[str]]:
    """(metrics, problems) from the program's output: success pattern, parser, regex metrics."""
    metrics, problems = {}, []
    spec = app.spec
    if spec.success and not re.search(spec.success, output, re.M):
        problems.append(f"success pattern {spec.success!r} not found in the output")
    if spec.parser:
        try:
            metrics.update(parsers.get(spec.parser).parse(output))
        except parsers.ParseError as exc:
            problems.append(f"parser {spec.parser}: {exc}")
    for metric in spec.metrics:
        found = re.findall(metric.regex, output, re.M)
        if not found:
            problems.append(f"metric {metric.name}: regex {metric.regex!r} matched nothing in the output")
            continue
        value = found[0 if metric.match == "first" else -1]
        value = value[0] if isinstance(value, tuple) else value
        try:
            metrics[metric.name] = float(value)
        except ValueError:
            problems.append(f"metric {metric.name}: matched {value!r}, not a number")
    return metrics, problems


def _checked(app: App) -> str:
    parts = [f"success pattern {app.spec.success!r} found"] if app.spec.success else []
    if app.spec.parser:
        parts.append(f"parser {app.spec.parser} read the output")
    if app.spec.metrics:
        parts.append(f"{len(app.spec.metrics)} declared metric(s) read")
    return "; ".join(parts) or "nothing else declared to check"


def _culprit_text(culprit: dict) -> str:
    how = f"was killed by {culprit['signal_name']}" if culprit.get("signal_name") else "ended first"
    return f"rank {culprit.get('rank')} on {culprit.get('host')} {how}"


def _labelled(placement: list[dict], spec) -> list[dict]:
    labels = spec.placement_labels or []
    return [{**(labels[p["rank"]] if p.get("rank", -1) < len(labels) else {}), **p} for p in placement]


def _placement_problems(placement: list[dict], ranks: int, spec) -> list[str]:
    from vnetbench.kernels.placement import check_expected

    if len(placement) != ranks:
        return [f"placement: {len(placement)} of {ranks} ranks reported where they ran (the wrapper did not "
                f"start on every rank, or the ranks' hosts do not share the launcher's files)"]
    return check_expected(placement, spec.expected_placement)


def _record(*, app: App, ranks, realised, run_id, repetition, started_at, launch, status, detail, elapsed=None,
            output="", outcome=None, placement=(), metrics=None, world=None) -> dict:
    from vnetbench import environment

    metrics = dict(metrics or {})
    if elapsed is not None:
        metrics["elapsed_s"] = round(elapsed, 6)
    hostnames = sorted({p.get("hostname") for p in placement if p.get("hostname")})
    return make_record(
        kernel=app.name, params={"definition": app.definition_hash()}, ranks=ranks, metrics=metrics,
        validation={"passed": status == "ok", "detail": detail}, placement=list(placement),
        environment=environment.collect(hostnames, world.library if world else None),
        topology=realised.describe(), run_id=run_id,
        repetition=repetition, started_at=started_at, status=status, launch=launch,
        app={"name": app.name, "definition_hash": app.definition_hash(), "source": str(app.source),
             "command": app.argv(), "program": app.program(), "program_hash": app.program_hash(),
             **app.declaration()},
        exit_status=outcome.returncode if outcome is not None else None,
        world_guard=world.record if world else None,
        output_tail=[line[:TAIL_CHARS] for line in last_lines(output, TAIL_LINES)]
        + [f"[stderr] {line.rstrip()[:TAIL_CHARS]}" for line in (outcome.stderr_tail[-TAIL_LINES:] if outcome else [])],
    )
