"""The Slurm backend's ``Batch``: runs submitted as batch jobs from outside an allocation, waited for, collected.

``run``: one job for a request's repetitions; Ctrl-C cancels that job and only it. ``sweep``: every run of a
sweep a job of one repetition, all submitted at once (each noted in the ledger, so that a sweep run again over
the same store finds them), collected as they end; a sweep that stops early (Ctrl-C, --fail-fast) cancels the
jobs it submitted or adopted that have not ended, and only those.
"""

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench.core.store import append_or_show

from ..base import Batch, BatchItem
from . import jobs, ledger
from .allocation import step_launcher
from .cluster import slurm_cmd

# how long a sweep that stops waits for the jobs it cancelled to end before removing their directories (a job
# still ending could write into its directory again); those still ending stay in the ledger for --resume
CANCEL_WAIT_S = 15.0


@dataclass
class Queued:
    """A job of this sweep, submitted or found again in the ledger."""

    item: BatchItem
    work: Path
    ended: dict | None = None  # how it ended, for a job Slurm no longer knows


class SlurmBatch(Batch):
    """Batch jobs on a Slurm cluster (see the module's docstring)."""

    def run(self, topology, request: dict, ranks: int, *, command: list[str], store, launcher,
            on_record=None) -> list[dict]:
        work = jobs.work_dir(store)
        request = {**request, "store": str(work / jobs.RECORDS)}
        try:
            job_id = jobs.submit(topology, request, ranks, work, command, launcher)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            jobs.remove_root(store)
            raise
        try:
            print(f"vnetbench: submitted Slurm job {job_id} ({request['record']['kernel']} x{ranks} on "
                  f"{topology.name})", file=sys.stderr)
            info = jobs.wait(job_id, on_state=lambda j, s: print(f"vnetbench: Slurm job {j}: {s}", file=sys.stderr))
            records, state = jobs.collect(job_id, info, work, request, topology)
        except KeyboardInterrupt:  # also when it comes before wait() watches the job
            slurm_cmd("scancel", job_id, check=False)
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
            jobs.remove_root(store)
        if not records:
            print(f"vnetbench: Slurm job {job_id} was {state}: not run", file=sys.stderr)
        for record in records:
            if store is not None:
                append_or_show(store, record)
            if on_record:
                on_record(record)
        return records

    def sweep(self, items: list[BatchItem], *, command: list[str], store, launcher, resume: bool, on_start=None,
              on_finish=None, say=None) -> list[dict]:
        """Submit every item (or find its job again in the ledger), wait for all, store each record as its job
        ends; ``on_start(item.job)`` when Slurm starts a job, ``on_finish(item.job, record)`` for its record,
        ``on_finish(item.job, None)`` for a job cancelled outside the sweep without a result (not run).

        The ledger is read whether or not ``resume`` is set: a job it names for a run is that run already in
        flight (a sweep killed before it could cancel anything), and submitting the run again would run it twice.
        """
        if launcher is not None:  # a launcher the site cannot do is refused before any job is submitted
            for topology in {id(item.topology): item.topology for item in items}.values():
                step_launcher(topology.launcher, launcher)
        layouts = {(id(item.topology), item.ranks): (item.topology, item.ranks) for item in items}
        for topology, ranks in layouts.values():  # every layout possible, or none submitted
            jobs.placement(topology, ranks)
        path = ledger.path_of(store)
        book = ledger.read(path)
        pending: dict[str, Queued] = {}  # job id -> its job
        try:
            return _submit_and_collect(items, command, store, launcher, path, book, pending, on_start, on_finish,
                                       say)
        except BaseException:  # while submitting too: the jobs submitted so far
            _cancel(pending, book, path, store, say)
            raise
        finally:
            if not book:
                path.unlink(missing_ok=True)
                jobs.remove_root(store)


def _submit_and_collect(items, command, store, launcher, path, book, pending, on_start, on_finish,
                        say) -> list[dict]:
    for item in items:
        entry = ledger.entry_of(book, item.key)
        if entry:
            what, ended = ledger.found_again(entry["job_id"], Path(entry["work"]))
            shown = f"{item.label}: Slurm job {entry['job_id']}"
            if what != "resubmit":
                if say:
                    say(f"{shown} found again" if what == "wait" else
                        f"{shown} ended and Slurm no longer knows it; its results are taken from {entry['work']}")
                pending[entry["job_id"]] = Queued(item, Path(entry["work"]), ended)
                continue
            if say:
                say(f"{shown} was cancelled or left nothing in {entry['work']}; submitting it again")
            jobs.remove_work(Path(entry["work"]), store)
        if book.pop(item.key, None) is not None:
            ledger.write(path, book)
        work = jobs.work_dir(store)
        request = {**item.request, "store": str(work / jobs.RECORDS)}
        try:
            job_id = jobs.submit(item.topology, request, item.ranks, work, command, launcher)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        pending[job_id] = Queued(item, work)
        book[item.key] = {"job_id": job_id, "work": str(work), "request": request}
        ledger.write(path, book)
    records, states, started, watch = [], {}, set(), jobs.Watch()
    while pending:
        for job_id in list(pending):
            queued = pending[job_id]
            info = queued.ended or watch.state(job_id)
            state = info.get("JobState", "UNKNOWN")
            if states.get(job_id) != state and say:
                say(f"Slurm job {job_id}: {state}")
            states[job_id] = state
            if state in jobs.STARTED and job_id not in started:
                started.add(job_id)
                if on_start:
                    on_start(queued.item.job)
            if state not in jobs.TERMINAL:
                continue
            del pending[job_id]
            got, _ = jobs.collect(job_id, info, queued.work, queued.item.request, queued.item.topology)
            for record in got:
                record["repetition"] = queued.item.repetition
                append_or_show(store, record)
                records.append(record)
            # stored: the job is done with, before on_finish (which may stop the sweep) hears of it
            book.pop(queued.item.key, None)
            ledger.write(path, book)
            jobs.remove_work(queued.work, store)
            for record in got or [None]:
                if on_finish:
                    on_finish(queued.item.job, record)
        if pending:
            time.sleep(jobs.POLL_S)
    return records


def _cancel(pending: dict, book: dict, path: Path, store, say) -> None:
    """scancel the sweep's jobs that have not ended; once they have, their directories and ledger entries go."""
    ours = [job_id for job_id, queued in pending.items() if queued.ended is None]
    if not ours:
        return
    slurm_cmd("scancel", *ours, check=False)
    left, deadline = set(ours), time.monotonic() + CANCEL_WAIT_S
    while left:
        left = {job_id for job_id in left if jobs.job_info(job_id).get("JobState") not in jobs.TERMINAL}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(jobs.POLL_S)
    kept = []
    for job_id in ours:
        if job_id in left:
            continue
        queued = pending.pop(job_id)
        # a job that ended by itself before the cancel reached it keeps its results for --resume
        if jobs.job_info(job_id).get("JobState") != "CANCELLED" or jobs.passed(queued.work):
            kept.append(job_id)
            continue
        jobs.remove_work(queued.work, store)
        book.pop(queued.item.key, None)
    ledger.write(path, book)
    if kept and say:
        say(f"Slurm job(s) {', '.join(kept)} ended before the cancel reached them: their results wait for --resume")
    if say:
        say(f"cancelled Slurm job(s) {', '.join(ours)}" + (f"; {', '.join(sorted(left))} still ending, left for "
                                                            f"--resume" if left else ""))
