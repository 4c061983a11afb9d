"""One Slurm batch job: its directory, script and sbatch; its state as polled; its records once it ended.

The job runs the command the runtime gave (its request's path appended) on its first node; that writes the
request's "store", the job's own records. Here the job's final state becomes the statuses of the records:
TIMEOUT -> timeout, NODE_FAIL, FAILED, OUT_OF_MEMORY (and BOOT_FAIL, DEADLINE, PREEMPTED, LOST) -> failed with
Slurm's reason, CANCELLED -> not run (no record). Finished repetitions are kept whatever the job's end; a
repetition the job left no record of gets a failure record saying why, made of the request's "record".
"""

import json
import re
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from vnetbench.core.errors import UsageError, VnetbenchError
from vnetbench.core.records import failure_record, new_run_id, now

from .allocation import step_launcher
from .cluster import discover, hostnames, job_facts, leaf_switches, slurm_cmd, version

TERMINAL = {"LOST", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "CANCELLED", "OUT_OF_MEMORY", "BOOT_FAIL",
            "DEADLINE", "PREEMPTED"}
FAILED = {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
STARTED = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}
POLL_S = 0.5
# how long a job may go unseen (slurmctld not answering, or the job forgotten) before it counts as lost
LOST_S = 120.0
RECORDS = "records.jsonl"  # the job's own store, in its directory
OUTPUT = "job.out"


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
        out = slurm_cmd("scontrol", "show", "job", "-o", job_id, check=False)
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


def script(command: list[str], request_path: Path) -> str:
    """The batch script: the runtime's command runs the request on the allocation."""
    return "\n".join(["#!/bin/sh", f"# vnetbench: {request_path}",
                      f"exec {shlex.join([*command, str(request_path)])}", ""])


def placement(topology, ranks: int) -> list[str]:
    """sbatch's options placing ``ranks`` ranks on ``topology``; UsageError when the partition cannot."""
    cluster = discover(topology.partition)
    nodes = topology.node_count(ranks)
    placing, why = cluster.layout(nodes, topology.switches)
    if why:
        raise UsageError(f"topology {topology.name}: {why}")
    if ranks < nodes:
        raise UsageError(f"--ranks: {ranks} rank(s) for {nodes} Slurm nodes would leave a node idle; "
                         f"use at least {nodes}")
    return placing


def job_name(request: dict) -> str:
    """``vnetbench-WORKLOAD`` as squeue shows it (an application's name is the user's: kept to a safe few)."""
    shown = re.sub(r"[^A-Za-z0-9_.-]", "_", str(request["record"]["kernel"]))[:40]
    return f"vnetbench-{shown}"


def submit(topology, request: dict, ranks: int, work: Path, command: list[str], launcher=None) -> str:
    """Write the request and its script in ``work``, sbatch them on ``topology``; the job id. UsageError when the
    partition cannot provide the layout, or its srun cannot start ``launcher``'s ranks where the topology asks
    for srun."""
    if launcher is not None:
        step_launcher(topology.launcher, launcher)
    placing = placement(topology, ranks)
    work.mkdir(parents=True, exist_ok=True)
    request_path = work / "request.json"
    request_path.write_text(json.dumps(request, sort_keys=True))
    (work / "job.sh").write_text(script(command, request_path))
    # --distribution=cyclic: with more ranks than nodes, the allocation's CPUs and the ranks go round-robin over
    # the nodes (rank i on node i mod N), the placement the backend states and each rank checks.
    # --no-requeue: a job whose node failed ends NODE_FAIL (a failed record) instead of running again later.
    # --exclusive: a benchmark shares its nodes with no other job, its own sweep's included (a sweep submits
    # every run at once, and Slurm would otherwise run two of them on the same nodes, each measuring the other)
    argv = ["sbatch", "--parsable", f"--job-name={job_name(request)}", f"--ntasks={ranks}",
            "--distribution=cyclic", "--no-requeue", "--exclusive",
            f"--output={work / OUTPUT}", f"--chdir={work}", *topology.sbatch_options(), *placing,
            str(work / "job.sh")]
    return slurm_cmd(*argv).strip().split(";")[0]


def wait(job_id: str, on_state=None) -> dict:
    """Poll until the job ends; its last ``scontrol`` facts. Ctrl-C cancels it (and only it)."""
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
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        slurm_cmd("scancel", job_id, check=False)
        raise


def collect(job_id: str, info: dict, work: Path, request: dict, topology) -> tuple[list[dict], str]:
    """The job's records (each with ``slurm`` facts), missing repetitions filled by the job state's status;
    and the state. No records for a cancelled job."""
    state = effective_state(info.get("JobState", "UNKNOWN"), work / OUTPUT)
    records = records_in(work)
    facts = {"job_id": job_id, "state": state, "reason": info.get("Reason"), "exit_code": info.get("ExitCode"),
             "nodes": hostnames(info["NodeList"]) if info.get("NodeList", "(null)") != "(null)" else [],
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
    recorded = request["record"]  # the workload's name and parameters as its records give them
    for repetition in missing:
        records.append(failure_record(kernel=recorded["kernel"], params=recorded["params"], ranks=request["ranks"],
                                      status=status, detail=f"{why}; no result for this repetition; job "
                                      f"output: {_tail(work / OUTPUT)}",
                                      topology={"name": topology.name, "backend": "slurm",
                                                "spec": topology.to_dict(), "slurm": inner},
                                      run_id=new_run_id(), repetition=repetition, started_at=now(),
                                      slurm=facts))
    return records, state


def _job_facts(job_id: str, nodes: list[str], partition: str) -> dict:
    try:
        slurm_version, leaves = version(), leaf_switches()
    except UsageError:  # slurmctld not answering: the record still names the job and its nodes
        slurm_version, leaves = None, {}
    return job_facts(job_id, nodes, partition, slurm_version, leaves)


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


def records_in(work: Path) -> list[dict]:
    """The sound records a job wrote into its store (read as any store is: bounded, each record checked;
    a line cut short by a job killed mid-write is left out); none when it wrote none."""
    from vnetbench.core.store import Store

    path = Path(work) / RECORDS
    if not path.is_file():
        return []
    try:
        return Store(path).scan()[0]
    except (OSError, VnetbenchError):
        return []


def passed(work: Path) -> bool:
    """Whether a job's directory holds a passing record."""
    return any(r.get("status") == "ok" for r in records_in(work))


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(none)"


# ---- the jobs' directories -----------------------------------------------------------------------

def root_of(store) -> Path:
    """Where the jobs of runs into ``store`` keep their directories: beside it (``STORE.slurm/``)."""
    return Path(f"{store.path}.slurm")


def work_dir(store) -> Path:
    """A new directory for one job's request, script, output and records, beside the store: the job's
    nodes must see it, and a cluster's shared filesystem holds the user's files, not this node's /run."""
    if store is None:
        from vnetbench.core import rundir

        return Path(rundir.make_dir("slurm"))
    root = root_of(store)
    root.mkdir(mode=0o700, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="job-", dir=root))


def remove_work(work: Path, store=None) -> None:
    """Remove a job's directory - only one vnetbench made: ``job-*`` beside the store (a ledger is a file a
    user can edit or copy, and its paths are not trusted)."""
    work = Path(work)
    if work.name.startswith("job-") and (store is None or work.parent == root_of(store)):
        shutil.rmtree(work, ignore_errors=True)


def remove_root(store) -> None:
    """Remove ``STORE.slurm/`` once no job's directory is left in it."""
    if store is None:
        return
    try:
        root_of(store).rmdir()
    except OSError:
        pass
