"""``vnetbench sweep``: one kernel (or ``--app`` application) over topologies x rank counts x repetitions, stored
run by run.

Without options it runs a short version of the study's matrix (``--study quick``); ``--study
namd`` and ``--study stream`` run the study's two experiments, scaled to this machine.
Explicit --kernel, --topologies, --ranks, --repeat and --warmup override the study's. Kernel
options follow as in ``vnetbench run``. Combinations that cannot run here are listed before
anything starts; each topology is brought up once and stays up while the sweep alternates
configurations (every configuration's first repetition, then every second, ...); each finished
run is appended to the store at once, so Ctrl-C loses nothing finished, and --resume runs only
what the store lacks.
Exit 0 when every run passed, 1 when any failed, 2 on bad input (nothing started).
"""

import argparse
import sys
import time
from dataclasses import dataclass, field, replace

from vnetbench import kernels
from vnetbench.core.errors import UsageError
from vnetbench.core.options import int_range
from vnetbench.topologies.base import MAX_RANKS

from . import COMMANDS, common


def name_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing; give names separated by commas")
    return list(dict.fromkeys(names))


def rank_list(text: str) -> list[int]:
    parse = int_range(1, MAX_RANKS)
    try:
        counts = sorted({parse(part.strip()) for part in text.split(",") if part.strip()})
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}; give rank counts such as 2,4,8") from None
    if not counts:
        raise argparse.ArgumentTypeError(f"{text!r} names no rank count; give counts such as 2,4,8")
    return counts


def register(sub):
    from vnetbench.engine.studies import STUDIES

    parser = sub.add_parser("sweep", help=COMMANDS["sweep"], description=__doc__.replace("``", ""), add_help=False)
    parser.add_argument("--study", choices=list(STUDIES), help="start from a named study (default quick)")
    parser.add_argument("--kernel", metavar="K", help=f"one of: {', '.join(kernels.names())}")
    common.add_app(parser)
    common.add_vms(parser)
    parser.add_argument("--topologies", type=name_list, metavar="A,B,..",
                        help="presets, topology files or backend refs, as --topology of run takes them")
    parser.add_argument("--ranks", type=rank_list, metavar="N,M,..", help="rank counts")
    common.add_repeat(parser, default=None)
    parser.add_argument("--warmup", type=int_range(0, 100), metavar="N", default=None,
                        help="unrecorded runs of each configuration before its first measured one "
                             "(default: the study's where its kernel runs - 1 for quick's md -, else 0)")
    common.add_store(parser)
    parser.add_argument("--resume", action="store_true", help="skip runs the store already holds (passed)")
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop at the first run that fails, and refuse to start when any combination "
                             "cannot run here")
    parser.add_argument("--dry-run", action="store_true", help="show the plan and exit")
    common.add_timeout(parser)
    common.add_bind(parser)
    common.add_rank_options(parser)
    common.add_mpi(parser)
    common.add_profile(parser)
    parser.add_argument("-h", "--help", action="store_true", help="show help (with --kernel: its options)")
    parser.set_defaults(func=handle, parser=parser, takes_extra=True)


def say(text: str) -> None:
    print(f"vnetbench: {text}", file=sys.stderr, flush=True)


def print_help(parser, kernel: str) -> None:
    parser.print_help()
    if kernel in kernels.names():
        sub = argparse.ArgumentParser(add_help=False, usage=argparse.SUPPRESS)
        kernels.get(kernel).add_arguments(sub)
        print(f"\nkernel {kernel}: {kernels.get(kernel).DESCRIPTION}")
        print(sub.format_help().rstrip())


def handle(args) -> int:
    from vnetbench.engine import sweep
    from vnetbench.core.store import Store

    if args.help:
        print_help(args.parser, sweep.kernel_of(args.study, args.kernel))
        return 0
    from vnetbench import profile

    profile.check_mode(args.profile)
    asked = sweep.settle(args.study, args.kernel, args.topologies, args.ranks, args.repeat, args.extra, app=args.app)
    asked = replace(asked, topologies=[common.vm_ref(args, ref, lone=len(asked.topologies) == 1)
                                                for ref in asked.topologies])
    store = Store(args.store)
    store.check_writable()
    plan = sweep.plan(asked.workload, asked.topologies, asked.ranks, asked.repeat, bind=args.bind,
                      run_options=common.rank_options(args), timeout=args.timeout, store=store, resume=args.resume,
                      optional_topologies=args.topologies is None, mpi=args.mpi,
                      warmup=study_warmup(args, asked) if args.warmup is None else args.warmup,
                      profile=args.profile)
    return run_plan(args, asked.study, plan, asked.topologies, asked.ranks, store)


def study_warmup(args, asked) -> int:
    """The study's warm-up runs, where its workload is the one run (as its kernel options apply): none for
    another kernel or an application."""
    return asked.study.warmup if not args.app and asked.kernel == asked.study.kernel else 0


def run_plan(args, study, plan, topology_names, rank_counts, store) -> int:
    """Show the plan, run it under the progress bar, then the study table; the exit code."""
    if plan.skipped and args.fail_fast:
        what, why = plan.skipped[0]
        raise UsageError(f"--fail-fast: {what} cannot run here: {why} ({len(plan.skipped)} such combination(s))")
    describe_plan(args, study, plan, topology_names, rank_counts)
    if args.dry_run or not plan.jobs:
        return 0
    started, records = time.monotonic(), []
    try:
        outcome = run_with_progress(plan, store, args.fail_fast, records)
    except KeyboardInterrupt:
        say(f"interrupted: {len(records)} finished run(s) of {len(plan.jobs)} are in {args.store}, the run in "
            "flight left no record; the same command with --resume does the rest")
        raise
    return finish(args, plan, records, time.monotonic() - started, outcome)


def describe_plan(args, study, plan, topology_names, rank_counts) -> None:
    from vnetbench.analysis.tables import params_label

    setting = params_label(plan.kernel, plan.params, [])
    if args.study or not (args.kernel or args.app or args.topologies or args.ranks):
        say(f"study {study.name}: {study.description}")
        for note in study.notes:
            say(f"  {note}")
    say(f"sweep: {plan.kernel}{f' ({setting})' if setting else ''} on {', '.join(topology_names)} x ranks "
        f"{','.join(map(str, rank_counts))} x {plan.repeat} repetition(s) -> {args.store}")
    for what, why in plan.skipped:
        say(f"  cannot run here, skipped: {what}: {why}")
    if args.resume:
        retry = f"; {plan.retried} that did not pass are run again" if plan.retried else ""
        say(f"  resume: {len(plan.done)} run(s) already in the store{retry}")
    warmups = f", after {plan.warmup} warm-up run(s) of each configuration (not stored)" if plan.warmup else ""
    say(f"  {len(plan.jobs)} run(s) to do on {len({job.topology for job in plan.jobs})} topology(ies), "
        f"configurations alternating{warmups}")


class FailFast(Exception):
    """--fail-fast met the first run that did not pass: the sweep stops (a batch backend cancels its jobs)."""


@dataclass
class Tally:
    stopped: bool = False  # by --fail-fast
    not_run: list = field(default_factory=list)  # runs cancelled outside the sweep (a Slurm job scancel'ed)


def run_with_progress(plan, store, fail_fast, records: list) -> Tally:
    """Run the plan under a progress bar on stderr; ``records`` grows as runs finish.

    The bar counts the runs pending, running and done (a batch backend runs many at once); a run cancelled
    outside the sweep is not run and leaves the total."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from vnetbench.engine import sweep

    console = Console(stderr=True, highlight=False)
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), TextColumn("ETA"),
               TimeRemainingColumn()]
    outcome = Tally()
    with Progress(*columns, console=console, redirect_stderr=True, redirect_stdout=False) as progress:
        task = progress.add_task("starting", total=len(plan.jobs), failed=0)
        count = {"total": len(plan.jobs), "failed": 0}
        running, done = {}, set()  # job -> its description; jobs finished

        def show(prefix=""):
            pending = count["total"] - len(running) - len(done)
            counts = f"{prefix}{pending} pending, {len(running)} running, {len(done)} done"
            # one run at a time (the local backends): which one
            progress.update(task, description=f"{counts}: {next(iter(running.values()))}" if len(running) == 1
                            else counts)

        def on_bringup(name):
            progress.update(task, description=f"bringing up {name}")

        def on_start(job):
            running[job] = job.describe(plan.kernel, plan.repeat)
            show()

        def on_finish(job, record):
            running.pop(job, None)
            what = job.describe(plan.kernel, plan.repeat)
            if record is None:  # cancelled outside the sweep: not run, and not counted
                count["total"] -= 1
                outcome.not_run.append(what)
                progress.update(task, total=count["total"])
                tell(f"{what}: cancelled outside the sweep: not run")
                show()
                return
            records.append(record)
            done.add(job)
            count["failed"] += record["status"] != "ok"
            progress.update(task, advance=1, failed=count["failed"])
            show()
            detail = "" if record["status"] == "ok" else f": {record['validation'].get('detail', '')[:300]}"
            tell(f"{what}: {record['status']}{detail}")
            if fail_fast and record["status"] != "ok":
                raise FailFast(what)

        def tell(text):
            # soft_wrap: a line stays one line in a log (a wrapped job id or path is found by no grep)
            console.print(f"vnetbench: {text}", markup=False, soft_wrap=True)

        try:
            sweep.run_all(plan, store, fail_fast=fail_fast, on_bringup=on_bringup, on_start=on_start,
                          on_finish=on_finish, say=tell)
        except FailFast:
            outcome.stopped = len(done) < count["total"]  # the last run failing stops nothing
        # the last description stays on the screen (and is all a log of a non-terminal stderr shows)
        show("stopped by --fail-fast: " if outcome.stopped else "")
    return outcome


def finish(args, plan, records, seconds, outcome: Tally) -> int:
    from vnetbench import analysis
    from vnetbench.engine import sweep

    by_status = sweep.failures(records)
    bad = sum(by_status.values())
    shown = plan.done + records
    if shown:
        print(analysis.study(shown))
    stopped = " (stopped by --fail-fast)" if outcome.stopped else ""
    failures = ", ".join(f"{n} {status}" for status, n in by_status.items())
    not_run = f", {len(outcome.not_run)} not run (cancelled)" if outcome.not_run else ""
    say(f"{len(records)} run(s) in {seconds:.0f} s, {len(records) - bad} passed"
        f"{f', {failures}' if failures else ''}{not_run}{stopped}; appended to {args.store}")
    say(f"tables: vnetbench report --store {args.store}")
    unprofiled = [r for r in records if r.get("profile") and r["profile"].get("status") != "ok"]
    for record in unprofiled:  # a profile asked for and not had whole is no success
        say(f"{record['kernel']} x{record['ranks']} on {record['topology'].get('name')} repetition "
            f"{record['repetition'] + 1}: profile {record['profile'].get('status')}: {record['profile'].get('reason')}")
    return 1 if bad or unprofiled else 0
