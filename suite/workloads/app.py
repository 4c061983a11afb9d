"""An application definition as a workload: any MPI program, judged by its exit, its world and its output.

The program runs under the rank-side wrapper (placement from inside each rank, then exec) with the
world-size guard preloaded (apps/worldsize.py): ranks that joined a world other than the one launched fail
the run, and the MPI library they loaded goes into the record's environment. Its stdout is passed on and
kept with a bound (apps/output.py), then read: the success pattern, the parser, the regex metrics. A run
that fails, is killed, times out or lacks what it declared is recorded with its status and the reason,
never as a success.
"""

import time
from pathlib import Path

from vnetbench import apps
from vnetbench.apps import parsers, worldsize, wrapper
from vnetbench.apps.model import App
from vnetbench.apps.output import TAIL_CHARS, Capture, last_lines
from vnetbench.core.errors import UsageError
from vnetbench.core.records import make_record

from .base import Run, Workload

TAIL_LINES = 20  # of the output, kept in the record


class AppWorkload(Workload):
    """``app`` (a loaded definition); ``adhoc`` holds what ``exec --record`` typed, for a batch job's request."""

    kind = "app"

    def __init__(self, app: App, adhoc: dict | None = None):
        self.app, self.adhoc = app, adhoc
        self.name, self.params = app.name, {"definition": app.definition_hash()}

    @classmethod
    def load(cls, path) -> "AppWorkload":
        """The definition in ``path`` (``--app FILE.yaml``)."""
        return cls(apps.load_app(path))

    @classmethod
    def of_program(cls, program: list[str], parser: str | None = None) -> "AppWorkload":
        """``exec --record -- PROGRAM``: the program as given, read by ``parser`` when named."""
        app = apps.adhoc(program, parser)
        return cls(app, {"command": list(program), "parser": parser, "cwd": str(app.folder)})

    @property
    def program(self) -> str:
        return self.app.program()

    def check_startable(self) -> None:
        self.app.check_startable()

    def check_rank_options(self, options: dict | None) -> dict:
        given = [key for key, value in (options or {}).items() if value]
        if given:  # the kernels' rank side reads them; an application's ranks never would
            raise UsageError(f"--{given[0].replace('_', '-')}: a kernel option; an application sets its own "
                             f"(its command and env)")
        return {}

    def default_timeout(self, ranks: int) -> float | None:
        return self.app.spec.timeout

    def prepare(self, run: Run) -> None:
        run.seen["guard"] = worldsize.build_guard()  # compiled once per user and source, before the clock starts

    def rank_argv(self, run: Run) -> list[str]:
        profiling = getattr(run, "profiling", None)
        return wrapper.command(self.app.argv(), self.app.spec.env, run.seen["guard"].path,
                               profiling.token() if profiling else None)

    def profiled(self, run: Run, argv: list[str]) -> list[str]:
        return argv  # the wrapper preloads the profiler after the world-size guard (rank_argv)

    def passthrough(self, run: Run):
        run.seen["capture"] = Capture(run.echo)
        return run.seen["capture"]

    def observe(self, run: Run, job_dir) -> None:
        run.seen["placement"] = wrapper.read_placement(job_dir, run.ranks)
        run.seen["world"] = worldsize.judge(run.seen["guard"], worldsize.read_worlds(job_dir), run.ranks, run.launcher)

    def not_started(self, run: Run, what: str, vms: list[str]) -> dict:
        return self._record(run, "failed", f"{what}; the program was not started")

    def judge(self, run: Run) -> dict:
        outcome, world, command = run.outcome, run.seen["world"], self.app.spec.command[0]
        output = run.seen["capture"].text()
        placement = _labelled(run.seen["placement"], run.spec)
        ran = dict(output=output, placement=placement)
        if run.problem:
            return self._record(run, "failed", run.problem["detail"], **ran)
        if outcome.timed_out:
            return self._record(run, "timeout", f"no exit after {run.timeout:g} s; the job was killed with its whole "
                                f"process tree", **ran)
        if world.problem:
            # a launcher and an MPI library that do not belong together: N singletons, each exiting 0
            how = f"; {command} exited with status {outcome.returncode}" if outcome.returncode else ""
            return self._record(run, "failed", f"{world.problem}{how}", **ran)
        if outcome.returncode != 0:
            culprit = run.culprit
            who = f"{culprit['detail'] if 'detail' in culprit else _culprit_text(culprit)}; " if culprit else ""
            how = (f"was killed by signal {-outcome.returncode}" if outcome.returncode < 0
                   else f"exited with status {outcome.returncode}")
            return self._record(run, "failed", f"{who}{command} {how}; last stderr: {outcome.tail()}", **ran)
        # the patterns get what is left of the run's timeout: a pattern that cannot finish does not hold the run
        deadline = None if run.timeout is None else time.monotonic() + max(0.0, run.timeout - run.elapsed)
        metrics, problems = read_output(self.app, output + "".join(outcome.stderr_tail), deadline)
        problems += _placement_problems(placement, run.ranks, run.spec)
        unread = run.seen["capture"].notes() + world.notes
        if problems:
            return self._record(run, "invalid", "; ".join(problems + unread), metrics=metrics, **ran)
        return self._record(run, "ok", "; ".join([f"exit 0; {_checked(self.app)}", *unread]), metrics=metrics, **ran)

    def _record(self, run: Run, status: str, detail: str, *, output: str = "", placement=(), metrics=None) -> dict:
        from vnetbench.core import environment

        app, outcome, world = self.app, run.outcome, run.seen.get("world")
        metrics = dict(metrics or {})
        if run.elapsed is not None:
            metrics["elapsed_s"] = round(run.elapsed, 6)
        hostnames = sorted({p.get("hostname") for p in placement if p.get("hostname")})
        stderr = outcome.stderr_tail[-TAIL_LINES:] if outcome else []
        return make_record(
            kernel=app.name, params=self.params, ranks=run.ranks, metrics=metrics,
            validation={"passed": status == "ok", "detail": detail}, placement=list(placement),
            environment=environment.collect(hostnames, world.library if world else None),
            topology=run.realised.describe(), run_id=run.run_id, repetition=run.repetition,
            started_at=run.started_at, status=status, launch=run.launch,
            app={"name": app.name, "definition_hash": app.definition_hash(), "source": str(app.source),
                 "command": app.argv(), "program": app.program(), "program_hash": app.program_hash(),
                 **app.declaration()},
            exit_status=outcome.returncode if outcome is not None else None,
            world_guard=world.record if world else None,
            output_tail=[line[:TAIL_CHARS] for line in last_lines(output, TAIL_LINES)]
            + [f"[stderr] {line.rstrip()[:TAIL_CHARS]}" for line in stderr],
        )

    def to_request(self) -> dict:
        if self.adhoc is not None:
            return {"kind": self.kind, **self.adhoc}
        return {"kind": self.kind, "source": str(self.app.source)}

    @classmethod
    def from_request(cls, data: dict) -> "AppWorkload":
        if "source" in data:
            return cls.load(data["source"])
        app = apps.adhoc(data["command"], data.get("parser"))
        # relative paths in the command resolve where exec was typed, as they did there
        return cls(App(app.spec, Path(data["cwd"]) / app.source.name), dict(data))


def read_output(app: App, output: str, deadline: float | None = None) -> tuple[dict, list[str]]:
    """(metrics, problems) from the program's output: success pattern, parser, regex metrics. The patterns run
    in bounded time (apps/patterns.py): one that needs more than is left before ``deadline`` (a
    ``time.monotonic()`` value) is a problem naming it, as is one that found nothing."""
    from vnetbench.apps import patterns

    metrics, problems = {}, []
    spec = app.spec
    if spec.success:
        try:
            if not patterns.search(spec.success, output, deadline):
                problems.append(f"success pattern {spec.success!r} not found in the output")
        except patterns.Unfinished as exc:
            problems.append(f"success pattern {spec.success!r}: {exc}")
    if spec.parser:
        try:
            metrics.update(parsers.PARSERS.load(spec.parser).parse(output))
        except parsers.ParseError as exc:
            problems.append(f"parser {spec.parser}: {exc}")
    for metric in spec.metrics:
        try:
            value = patterns.find(metric.regex, output, metric.match, deadline)
        except patterns.Unfinished as exc:
            problems.append(f"metric {metric.name}: regex {metric.regex!r}: {exc}")
            continue
        if value is None:
            problems.append(f"metric {metric.name}: regex {metric.regex!r} matched nothing in the output")
            continue
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
