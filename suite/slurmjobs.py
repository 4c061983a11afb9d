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
    store = work / "records.jsonl"
    records = [json.loads(line) for line in store.read_text().splitlines() if line.strip()] if store.exists() else []
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
    for repetition in range(request["repeat"]):
        if repetition not in done:
            records.append(failure_record(kernel=request["kernel"], params=request["params"], ranks=request["ranks"],
                                          status=status, detail=f"{why}; no result for this repetition; job "
                                          f"output: {_tail(work / 'job.out')}",
                                          topology={"name": topology.name, "backend": "slurm",
                                                    "spec": topology.to_dict()},
                                          run_id=new_run_id(), repetition=repetition, started_at=now(),
                                          slurm=facts))
    return records, state


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

    request = json.loads(Path(argv[0]).read_text())
    topology = topologies.load(request["topology"])
    records = runner.run_kernel(request["kernel"], request["params"], request["ranks"], topology=topology,
                      repeat=request["repeat"], store=request["store"], timeout=request["timeout"],
                      bind=request["bind"], rank_options=request["rank_options"], mpi=request["mpi"])
    # a failed run fails the job: Slurm's state (FAILED) then says what the records say
    return 0 if all(record["status"] == "ok" for record in records) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


# ---- sweeps: every run a job, all submitted at once, found again by id on --resume ----------------

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


def sweep(plan, jobs: list, store, *, on_start=None, on_finish=None, say=None) -> list[dict]:
    """Submit every job (or find it again in the ledger), wait for all, store each record as its job ends.

    Returns the records; a job cancelled by someone else gives none (not run). Ctrl-C cancels the jobs this
    sweep submitted or adopted that have not ended, and only those.
    """
    if plan.launcher is not None:  # a launcher the site cannot do is refused before any job is submitted
        for name in {job.topology for job in jobs}:
            slurm.step_launcher(plan.topologies[name].launcher, plan.launcher)
    for name, ranks in {(job.topology, job.ranks) for job in jobs}:  # every layout possible, or none submitted
        placement(plan.topologies[name], ranks)
    path = ledger_path(store)
    ledger = _read_ledger(path)
    pending = {}  # job id -> (sweep job, work dir, request, topology)
    try:
        records = _submit_and_collect(plan, jobs, store, path, ledger, pending, on_start, on_finish, say)
    except KeyboardInterrupt:  # while submitting too: the jobs submitted so far
        if pending:
            slurm.slurm_cmd("scancel", *pending, check=False)
        raise
    if not _read_ledger(path):
        path.unlink(missing_ok=True)
        _remove_root(store)
    return records


def _submit_and_collect(plan, jobs, store, path, ledger, pending, on_start, on_finish, say) -> list[dict]:
    from vnetbench.store import append_or_show

    for job in jobs:
        topology = plan.topologies[job.topology]
        key = json.dumps([list(map(str, plan.key(job))), job.repetition])
        entry = ledger.get(key)
        if entry and job_info(entry["job_id"]).get("JobState") not in (None, "CANCELLED"):
            if say:
                say(f"{job.describe(plan.kernel, plan.repeat)}: Slurm job {entry['job_id']} found again")
            pending[entry["job_id"]] = (job, Path(entry["work"]), entry["request"], topology)
            continue
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
        pending[job_id] = (job, work, request, topology)
        ledger[key] = {"job_id": job_id, "work": str(work), "request": request}
        _write_ledger(path, ledger)
        if on_start:
            on_start(job)
    records, states, watch = [], {}, Watch()
    while pending:
        for job_id in list(pending):
            info = watch.state(job_id)
            state = info.get("JobState", "UNKNOWN")
            if states.get(job_id) != state and say:
                say(f"Slurm job {job_id}: {state}")
            states[job_id] = state
            if state not in TERMINAL:
                continue
            job, work, request, topology = pending.pop(job_id)
            got, _ = collect(job_id, info, work, request, topology)
            for record in got:
                record["repetition"] = job.repetition
                append_or_show(store, record)
                records.append(record)
                if on_finish:
                    on_finish(job, record)
            ledger = {k: v for k, v in ledger.items() if v["job_id"] != job_id}
            _write_ledger(path, ledger)
            shutil.rmtree(work, ignore_errors=True)
        if pending:
            time.sleep(POLL_S)
    return records

