"""Runs on the slurm backend from outside an allocation: one batch job per run, waited for, its records collected.

The job runs ``python -m vnetbench.slurmjobs REQUEST.json`` on its first node: that is an ordinary
``run_kernel`` on the allocation (the slurm backend attaches to it) writing to the job's own store.
Here the job's final state becomes the statuses of the records: TIMEOUT -> timeout, NODE_FAIL, FAILED,
OUT_OF_MEMORY (and BOOT_FAIL, DEADLINE, PREEMPTED) -> failed with Slurm's reason, CANCELLED -> not run
(no record). Finished repetitions are kept whatever the job's end; Ctrl-C cancels this job and only it.
"""

import json
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vnetbench.errors import UsageError
from vnetbench.records import failure_record, new_run_id, now
from vnetbench.topologies import slurm

TERMINAL = {"LOST", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "CANCELLED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED"}
FAILED = {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
POLL_S = 0.5
# how long a job may go unseen (slurmctld not answering, or the job forgotten) before it counts as lost
LOST_S = 120.0


def status_of(state: str) -> str | None:
    """The record status a job that ended in ``state`` gives its missing repetitions (None: not run)."""
    if state == "TIMEOUT":
        return "timeout"
    if state in FAILED:
        return "failed"
    if state == "CANCELLED":
        return None
    return "failed"  # COMPLETED without a record: the job ran and produced nothing


def job_info(job_id: str) -> dict:
    """``scontrol show job`` as a dict (JobState, Reason, NodeList, ExitCode, ...); {} once Slurm forgot it."""
    try:
        out = slurm.slurm_cmd("scontrol", "show", "job", "-o", job_id, check=False)
    except UsageError:  # slurmctld busy (killing a job can stall it for seconds): ask again later
        return {}
    info = {}
    for item in out.split():
        key, sep, value = item.partition("=")
        if sep:
            info.setdefault(key, value)
    return info


class Watch:
    """Job states as polled; a job unseen for LOST_S ends as LOST (a failure saying so)."""

    def __init__(self):
        self.unseen_since: dict[str, float] = {}

    def state(self, job_id: str) -> dict:
        info = job_info(job_id)
        if info.get("JobState"):
            self.unseen_since.pop(job_id, None)
            return info
        since = self.unseen_since.setdefault(job_id, time.monotonic())
        if time.monotonic() - since > LOST_S:
            return {"JobState": "LOST", "Reason": f"Slurm did not report job {job_id} for {LOST_S:g} s"}
        return {"JobState": "UNKNOWN"}


def script(request_path: Path, out_dir: Path) -> str:
    """The batch script: this Python runs the request on the allocation."""
    return "\n".join([
        "#!/bin/sh",
        f"# vnetbench: {request_path}",
        f"exec {shlex.quote(sys.executable)} -m vnetbench.slurmjobs {shlex.quote(str(request_path))}",
        "",
    ])


def placement(topology, ranks: int) -> list[str]:
    """sbatch's options placing ``ranks`` ranks on ``topology``; UsageError when the partition cannot."""
    cluster = slurm.discover(topology.partition)
    nodes = topology.node_count(ranks)
    placing, why = cluster.layout(nodes, topology.switches)
    if why:
        raise UsageError(f"topology {topology.name}: {why}")
    if ranks < nodes:
        raise UsageError(f"--ranks: {ranks} rank(s) for {nodes} Slurm nodes would leave a node idle; "
                         f"use at least {nodes}")
    return placing


def submit(topology, request: dict, ranks: int, work: Path, extra: list[str] | None = None, mpi=None) -> str:
    """sbatch the request on ``topology``; the job id. UsageError when the partition cannot provide the layout,
    or its srun cannot start ``mpi``'s ranks (a flavours.Launcher) when the topology asks for srun."""
    if mpi is not None:
        slurm.step_launcher(topology.launcher, mpi)
    placing = placement(topology, ranks)
    work.mkdir(parents=True, exist_ok=True)
    request_path = work / "request.json"
    request_path.write_text(json.dumps(request, sort_keys=True))
    (work / "job.sh").write_text(script(request_path, work))
    # --distribution=cyclic: with more ranks than nodes, the allocation's CPUs and the ranks go round-robin over
    # the nodes (rank i on node i mod N), the placement the backend states and each rank checks.
    # --no-requeue: a job whose node failed ends NODE_FAIL (a failed record) instead of running again later.
    # --exclusive: a benchmark shares its nodes with no other job, its own sweep's included (a sweep submits
    # every run at once, and Slurm would otherwise run two of them on the same nodes, each measuring the other)
    argv = ["sbatch", "--parsable", f"--job-name=vnetbench-{request['kernel']}", f"--ntasks={ranks}",
            "--distribution=cyclic", "--no-requeue", "--exclusive",
            f"--output={work / 'job.out'}", f"--chdir={work}", *topology.sbatch_options(), *placing,
            *(extra or []), str(work / "job.sh")]
    return slurm.slurm_cmd(*argv).strip().split(";")[0]


def wait(job_id: str, timeout: float | None = None, on_state=None) -> dict:
    """Poll until the job ends; its last ``scontrol`` facts. Ctrl-C cancels it (and only it)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last, watch = "", Watch()
    try:
        while True:
            info = watch.state(job_id)
            state = info.get("JobState", "UNKNOWN")
            if state != last and on_state:
                on_state(job_id, state)
            last = state
            if state in TERMINAL:
                return info
            if deadline and time.monotonic() > deadline:
                slurm.slurm_cmd("scancel", job_id, check=False)
                return {**info, "JobState": "TIMEOUT", "Reason": f"not finished after {timeout:g} s; cancelled"}
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        slurm.slurm_cmd("scancel", job_id, check=False)
        raise


def collect(job_id: str, info: dict, work: Path, request: dict, topology) -> tuple[list[dict], str]:
    """The job's records (each with ``slurm`` facts), missing repetitions filled by the job state's status;
    and the state. No records for a cancelled job."""
    state = effective_state(info.get("JobState", "UNKNOWN"), work / "job.out")
    records = _records(work / "records.jsonl")
    facts = {"job_id": job_id, "state": state, "reason": info.get("Reason"), "exit_code": info.get("ExitCode"),
             "nodes": slurm.hostnames(info["NodeList"]) if info.get("NodeList", "(null)") != "(null)" else [],
             "partition": info.get("Partition", topology.partition)}
    status = status_of(state)
    why = f"Slurm job {job_id} ended {state}" + (f" ({info['Reason']})" if info.get("Reason", "None") != "None"
                                                  else "")
    for record in records:
        record.setdefault("slurm", {}).update(facts)
        # a result written before the job ended stands; a repetition that failed carries Slurm's reason
        if status and state != "COMPLETED" and record["status"] != "ok":
            record["status"] = status
            record["validation"] = {**record.get("validation", {}),
                                    "detail": f"{why}; {record.get('validation', {}).get('detail', '')}"}
    if status is None:
        return [r for r in records if r["status"] == "ok"], state
    done = {r.get("repetition") for r in records}
    missing = [repetition for repetition in range(request["repeat"]) if repetition not in done]
    # what the job's own records say of it (topology.slurm), for the repetitions it left no record of
    inner = _job_facts(job_id, facts["nodes"], facts["partition"]) if missing else None
    for repetition in missing:
        records.append(failure_record(kernel=request["kernel"], params=request["params"], ranks=request["ranks"],
                                      status=status, detail=f"{why}; no result for this repetition; job "
                                      f"output: {_tail(work / 'job.out')}",
                                      topology={"name": topology.name, "backend": "slurm",
                                                "spec": topology.to_dict(), "slurm": inner},
                                      run_id=new_run_id(), repetition=repetition, started_at=now(),
                                      slurm=facts))
    return records, state


def _job_facts(job_id: str, nodes: list[str], partition: str) -> dict:
    try:
        version, leaves = slurm.version(), slurm.leaf_switches()
    except UsageError:  # slurmctld not answering: the record still names the job and its nodes
        version, leaves = None, {}
    return slurm.job_facts(job_id, nodes, partition, version, leaves)


# what slurmstepd writes into the job's output when it ends a job itself: the job's script may exit
# (non-zero, having recorded its killed ranks) before slurmctld marks the job TIMEOUT or NODE_FAIL
_ENDED_BY = {"DUE TO TIME LIMIT": "TIMEOUT", "DUE TO NODE FAILURE": "NODE_FAIL", "DUE TO PREEMPTION": "PREEMPTED"}


def effective_state(state: str, output: Path) -> str:
    """The job's state, or what Slurm said in its output it ended the job for."""
    if state in ("FAILED", "CANCELLED", "COMPLETED"):
        try:
            text = output.read_text(errors="replace")[-65536:]
        except OSError:
            return state
        for words, ended in _ENDED_BY.items():
            if words in text:
                return ended
    return state


def work_dir(store) -> Path:
    """A new directory for one job's request, script, output and records, beside the store: the job's
    nodes must see it, and a cluster's shared filesystem holds the user's files, not this node's /run."""
    if store is None:
        from vnetbench import rundir

        return Path(rundir.make_dir("slurm"))
    root = Path(f"{store.path}.slurm")
    root.mkdir(mode=0o700, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="job-", dir=root))


def _remove_work(work: Path, store=None) -> None:
    """Remove a job's directory - only one vnetbench made: ``job-*`` beside the store (a ledger is a file a
    user can edit or copy, and its paths are not trusted)."""
    work = Path(work)
    if work.name.startswith("job-") and (store is None or work.parent == Path(f"{store.path}.slurm")):
        shutil.rmtree(work, ignore_errors=True)


def _remove_root(store) -> None:
    if store is None:
        return
    try:
        Path(f"{store.path}.slurm").rmdir()  # only when no other job's directory is left
    except OSError:
        pass


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(none)"


def run(topology, kernel: str, params: dict, ranks: int, *, repeat: int, timeout: float, bind, rank_options: dict,
        mpi, store, on_record) -> list[dict]:
    """One batch job for ``repeat`` repetitions; wait; append and return its records."""
    from vnetbench import mpiselect

    launcher = mpiselect.choose(mpi)[0]
    work = work_dir(store)
    # the job starts the very launcher chosen here (by path): --mpi holds on the nodes
    request = {"kernel": kernel, "params": params, "ranks": ranks, "repeat": repeat, "timeout": timeout,
               "bind": bind, "rank_options": rank_options, "mpi": launcher.path, "topology": topology.ref,
               "store": str(work / "records.jsonl")}
    try:
        job_id = submit(topology, request, ranks, work, mpi=launcher)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        _remove_root(store)
        raise
    try:
        print(f"vnetbench: submitted Slurm job {job_id} ({kernel} x{ranks} on {topology.name})", file=sys.stderr)
        info = wait(job_id, on_state=lambda j, s: print(f"vnetbench: Slurm job {j}: {s}", file=sys.stderr))
        records, state = collect(job_id, info, work, request, topology)
    except KeyboardInterrupt:  # also when it comes before wait() watches the job
        slurm.slurm_cmd("scancel", job_id, check=False)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
        _remove_root(store)
    if not records:
        print(f"vnetbench: Slurm job {job_id} was {state}: not run", file=sys.stderr)
    for record in records:
        if store is not None:
            store.append(record)
        if on_record:
            on_record(record)
    return records


def main(argv: list[str]) -> int:
    """In the batch job: run the request on this allocation."""
    from vnetbench import runner, topologies
    from vnetbench.errors import Interrupted, interrupt_on_signals

    # Slurm ends a job (time limit, scancel, a failed node) with SIGTERM, SIGKILL following after KillWait:
    # unwind as the CLI does, so that the ranks' job is ended and its directory (/run, /dev/shm) removed
    interrupt_on_signals()
    request = json.loads(Path(argv[0]).read_text())
    topology = topologies.load(request["topology"])
    try:
        records = runner.run_kernel(request["kernel"], request["params"], request["ranks"], topology=topology,
                                    repeat=request["repeat"], store=request["store"], timeout=request["timeout"],
                                    bind=request["bind"], rank_options=request["rank_options"], mpi=request["mpi"])
    except Interrupted as exc:
        print(f"vnetbench: interrupted by signal {exc.signum}", file=sys.stderr)
        return 128 + exc.signum
    # a failed run fails the job: Slurm's state (FAILED) then says what the records say
    return 0 if all(record["status"] == "ok" for record in records) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


# ---- sweeps: every run a job, all submitted at once, found again by id on --resume ----------------

# how long a sweep that stops waits for the jobs it cancelled to end before removing their directories (a job
# still ending could write into its directory again); those still ending stay in the ledger for --resume
CANCEL_WAIT_S = 15.0
STARTED = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}


def ledger_path(store) -> Path:
    """Where a sweep notes the jobs it submitted (beside the store, so --resume finds them)."""
    return Path(f"{store.path}.slurm-jobs.json")


def _read_ledger(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_ledger(path: Path, ledger: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(ledger, indent=1, sort_keys=True))
    tmp.replace(path)  # a sweep killed mid-write leaves the previous ledger whole


def forgotten(job_id: str) -> bool:
    """slurmctld answered that it does not know the job (it ended more than MinJobAge ago), as opposed to
    not answering at all."""
    try:
        slurm.slurm_cmd("scontrol", "show", "job", "-o", job_id)
    except UsageError as exc:
        return "Invalid job id" in str(exc)
    return False


SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList", "Partition", "Reason")


def accounted(job_id: str) -> dict:
    """The job as Slurm's accounting remembers it (``sacct``), in ``job_info``'s keys; {} without accounting."""
    try:
        out = slurm.slurm_cmd("sacct", "-n", "-P", "-X", "-j", job_id, "-o", ",".join(SACCT_FIELDS))
    except UsageError:  # accounting_storage/none ("accounting storage is disabled"), or slurmdbd not answering
        return {}
    return parse_sacct(out, job_id)


def parse_sacct(text: str, job_id: str) -> dict:
    """``sacct -n -P -X -o JobID,State,ExitCode,NodeList,Partition,Reason`` for ``job_id``, in job_info's keys."""
    for line in text.splitlines():
        values = line.split("|")
        if len(values) == len(SACCT_FIELDS) and values[0] == job_id:
            row = dict(zip(SACCT_FIELDS, values))
            return {"JobState": (row["State"].split() or ["UNKNOWN"])[0],  # "CANCELLED by 0"
                    "ExitCode": row["ExitCode"], "NodeList": row["NodeList"] or "(null)",
                    "Partition": row["Partition"], "Reason": row["Reason"] or "None"}
    return {}


def _records(path: Path) -> list[dict]:
    """The sound records a job wrote into its store (read as any store is: bounded, each record checked;
    a line cut short by a job killed mid-write is left out); none when it wrote none."""
    from vnetbench.errors import VnetbenchError
    from vnetbench.store import Store

    if not path.is_file():
        return []
    try:
        return Store(path).scan()[0]
    except (OSError, VnetbenchError):
        return []


def from_work_dir(job_id: str, work: Path) -> dict:
    """How a job Slurm no longer knows ended, from what it left in its work directory, in job_info's keys;
    {} when it left nothing there (no records, no output: it never started)."""
    records = _records(work / "records.jsonl")
    if not records and not (work / "job.out").exists():
        return {}
    # the job exits 0 exactly when every run it recorded passed (main); slurmstepd's word on a time limit or a
    # node failure in its output is read by effective_state
    state = "COMPLETED" if records and all(r.get("status") == "ok" for r in records) else "FAILED"
    inner = [r.get("topology", {}).get("slurm") or {} for r in records]
    nodes = next((facts["nodes"] for facts in inner if facts.get("nodes")), [])
    partition = next((facts["partition"] for facts in inner if facts.get("partition")), None)
    return {"JobState": state, "NodeList": ",".join(nodes) or "(null)", "ExitCode": None,
            **({"Partition": partition} if partition else {}),
            "Reason": f"Slurm no longer knows job {job_id} and keeps no accounting; its state follows from "
                      f"{work}"}


def _passed(work: Path) -> bool:
    """Whether a job's work directory holds a passing record."""
    return any(r.get("status") == "ok" for r in _records(Path(work) / "records.jsonl"))


def found_again(job_id: str, work: Path) -> tuple[str, dict | None]:
    """What ``--resume`` does with a job its ledger names: ("wait", None) while Slurm knows it (or does not
    answer); ("collect", how it ended) once Slurm forgot it but its accounting or its work directory says;
    ("resubmit", None) when it was cancelled without a result, or left nothing."""
    state = job_info(job_id).get("JobState")
    passed = _passed(work)
    if state:
        return ("resubmit", None) if state == "CANCELLED" and not passed else ("wait", None)
    if not forgotten(job_id):
        return "wait", None  # slurmctld did not answer: the job may still run; waiting finds out (or ends LOST)
    ended = accounted(job_id)
    if ended.get("JobState") not in TERMINAL:
        ended = from_work_dir(job_id, work)
    if not ended or (ended["JobState"] == "CANCELLED" and not passed):
        return "resubmit", None
    return "collect", ended


@dataclass
class Queued:
    """A job of this sweep, submitted or found again in the ledger."""

    job: object  # sweep.Job
    key: str  # its ledger key
    work: Path
    request: dict
    topology: object
    ended: dict | None = None  # how it ended, for a job Slurm no longer knows


def sweep(plan, jobs: list, store, *, on_start=None, on_finish=None, say=None) -> list[dict]:
    """Submit every job (or find it again in the ledger), wait for all, store each record as its job ends.

    ``on_start(job)`` when Slurm starts a job, ``on_finish(job, record)`` for its record, and
    ``on_finish(job, None)`` for a job cancelled outside the sweep without a result (not run). Returns the
    records. A sweep that stops before its jobs end (Ctrl-C; an exception from ``on_finish``, as --fail-fast
    raises at the first failed record) cancels the jobs it submitted or adopted that have not ended, and only
    those, and removes their directories and ledger entries.
    """
    if plan.launcher is not None:  # a launcher the site cannot do is refused before any job is submitted
        for name in {job.topology for job in jobs}:
            slurm.step_launcher(plan.topologies[name].launcher, plan.launcher)
    for name, ranks in {(job.topology, job.ranks) for job in jobs}:  # every layout possible, or none submitted
        placement(plan.topologies[name], ranks)
    path = ledger_path(store)
    ledger = _read_ledger(path)
    pending: dict[str, Queued] = {}  # job id -> its job
    try:
        return _submit_and_collect(plan, jobs, store, path, ledger, pending, on_start, on_finish, say)
    except BaseException:  # while submitting too: the jobs submitted so far
        _cancel(pending, ledger, path, say)
        raise
    finally:
        if not ledger:
            path.unlink(missing_ok=True)
            _remove_root(store)


def _cancel(pending: dict, ledger: dict, path: Path, say) -> None:
    """scancel the sweep's jobs that have not ended; once they have, their directories and ledger entries go."""
    ours = [job_id for job_id, queued in pending.items() if queued.ended is None]
    if not ours:
        return
    slurm.slurm_cmd("scancel", *ours, check=False)
    left, deadline = set(ours), time.monotonic() + CANCEL_WAIT_S
    while left:
        left = {job_id for job_id in left if job_info(job_id).get("JobState") not in TERMINAL}
        if not left or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    kept = []
    for job_id in ours:
        if job_id in left:
            continue
        queued = pending.pop(job_id)
        # a job that ended by itself before the cancel reached it keeps its results for --resume
        if job_info(job_id).get("JobState") != "CANCELLED" or _passed(queued.work):
            kept.append(job_id)
            continue
        _remove_work(queued.work)
        ledger.pop(queued.key, None)
    _write_ledger(path, ledger)
    if kept and say:
        say(f"Slurm job(s) {', '.join(kept)} ended before the cancel reached them: their results wait for --resume")
    if say:
        say(f"cancelled Slurm job(s) {', '.join(ours)}" + (f"; {', '.join(sorted(left))} still ending, left for "
                                                            f"--resume" if left else ""))


def _submit_and_collect(plan, jobs, store, path, ledger, pending, on_start, on_finish, say) -> list[dict]:
    from vnetbench.store import append_or_show

    for job in jobs:
        topology = plan.topologies[job.topology]
        key = json.dumps([list(map(str, plan.key(job))), job.repetition])
        entry = ledger.get(key)
        if entry:
            what, ended = found_again(entry["job_id"], Path(entry["work"]))
            shown = f"{job.describe(plan.kernel, plan.repeat)}: Slurm job {entry['job_id']}"
            if what != "resubmit":
                if say:
                    say(f"{shown} found again" if what == "wait" else
                        f"{shown} ended and Slurm no longer knows it; its results are taken from {entry['work']}")
                pending[entry["job_id"]] = Queued(job, key, Path(entry["work"]), entry["request"], topology, ended)
                continue
            if say:
                say(f"{shown} was cancelled or left nothing in {entry['work']}; submitting it again")
            _remove_work(Path(entry["work"]), store)
            del ledger[key]
            _write_ledger(path, ledger)
        work = work_dir(store)
        request = {"kernel": plan.kernel, "params": plan.params, "ranks": job.ranks, "repeat": 1,
                   "timeout": plan.timeout, "bind": plan.bind, "rank_options": plan.run_options,
                   "mpi": plan.launcher.path if plan.launcher else None,  # the sweep's --mpi, on the nodes too
                   "topology": topology.ref, "store": str(work / "records.jsonl")}
        try:
            job_id = submit(topology, request, job.ranks, work, mpi=plan.launcher)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        pending[job_id] = Queued(job, key, work, request, topology)
        ledger[key] = {"job_id": job_id, "work": str(work), "request": request}
        _write_ledger(path, ledger)
    records, states, started, watch = [], {}, set(), Watch()
    while pending:
        for job_id in list(pending):
            queued = pending[job_id]
            info = queued.ended or watch.state(job_id)
            state = info.get("JobState", "UNKNOWN")
            if states.get(job_id) != state and say:
                say(f"Slurm job {job_id}: {state}")
            states[job_id] = state
            if state in STARTED and job_id not in started:
                started.add(job_id)
                if on_start:
                    on_start(queued.job)
            if state not in TERMINAL:
                continue
            del pending[job_id]
            got, _ = collect(job_id, info, queued.work, queued.request, queued.topology)
            for record in got:
                record["repetition"] = queued.job.repetition
                append_or_show(store, record)
                records.append(record)
            # stored: the job is done with, before on_finish (which may stop the sweep) hears of it
            ledger.pop(queued.key, None)
            _write_ledger(path, ledger)
            shutil.rmtree(queued.work, ignore_errors=True)
            for record in got or [None]:
                if on_finish:
                    on_finish(queued.job, record)
        if pending:
            time.sleep(POLL_S)
    return records
