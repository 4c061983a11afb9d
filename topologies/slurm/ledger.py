"""A sweep's ledger of the Slurm jobs it submitted, and how a sweep run again finds each one again.

The ledger (``STORE.slurm-jobs.json``, beside the store) maps a run's key (its configuration and repetition)
to its job id, its directory and its request; it is written as each job is submitted and an entry goes once
the job's records are stored. A sweep started again over the same store looks there first: a job Slurm still
knows is waited for; one it forgot is collected from Slurm's accounting or from what it left in its
directory; one cancelled without a result, or that left nothing, is submitted again.
"""

import json
from pathlib import Path

from vnetbench.core.errors import UsageError

from .cluster import slurm_cmd
from .jobs import OUTPUT, TERMINAL, job_info, passed, records_in


def path_of(store) -> Path:
    """Where a sweep notes the jobs it submitted (beside the store, so that a sweep run again finds them)."""
    return Path(f"{store.path}.slurm-jobs.json")


def read(path: Path) -> dict:
    try:
        ledger = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return ledger if isinstance(ledger, dict) else {}


def write(path: Path, ledger: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(ledger, indent=1, sort_keys=True))
    tmp.replace(path)  # a sweep killed mid-write leaves the previous ledger whole


def entry_of(ledger: dict, key: str) -> dict | None:
    """The ledger's entry for ``key`` when it is one a sweep wrote (a job id and a directory), else None: a ledger
    is a file a user can edit, and its job id goes to scontrol and scancel."""
    entry = ledger.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("job_id"), str) and entry["job_id"].isdigit() \
            and isinstance(entry.get("work"), str):
        return entry
    return None


def forgotten(job_id: str) -> bool:
    """slurmctld answered that it does not know the job (it ended more than MinJobAge ago), as opposed to
    not answering at all."""
    try:
        slurm_cmd("scontrol", "show", "job", "-o", job_id)
    except UsageError as exc:
        return "Invalid job id" in str(exc)
    return False


SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList", "Partition", "Reason")


def accounted(job_id: str) -> dict:
    """The job as Slurm's accounting remembers it (``sacct``), in ``job_info``'s keys; {} without accounting."""
    try:
        out = slurm_cmd("sacct", "-n", "-P", "-X", "-j", job_id, "-o", ",".join(SACCT_FIELDS))
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


def from_work_dir(job_id: str, work: Path) -> dict:
    """How a job Slurm no longer knows ended, from what it left in its work directory, in job_info's keys;
    {} when it left nothing there (no records, no output: it never started)."""
    records = records_in(work)
    if not records and not (work / OUTPUT).exists():
        return {}
    # the job exits 0 exactly when every run it recorded passed; slurmstepd's word on a time limit or a node
    # failure in its output is read by jobs.effective_state
    state = "COMPLETED" if records and all(r.get("status") == "ok" for r in records) else "FAILED"
    inner = [r.get("topology", {}).get("slurm") or {} for r in records]
    nodes = next((facts["nodes"] for facts in inner if facts.get("nodes")), [])
    partition = next((facts["partition"] for facts in inner if facts.get("partition")), None)
    return {"JobState": state, "NodeList": ",".join(nodes) or "(null)", "ExitCode": None,
            **({"Partition": partition} if partition else {}),
            "Reason": f"Slurm no longer knows job {job_id} and keeps no accounting; its state follows from "
                      f"{work}"}


def found_again(job_id: str, work: Path) -> tuple[str, dict | None]:
    """What a sweep does with a job its ledger names: ("wait", None) while Slurm knows it (or does not
    answer); ("collect", how it ended) once Slurm forgot it but its accounting or its work directory says;
    ("resubmit", None) when it was cancelled without a result, or left nothing."""
    state = job_info(job_id).get("JobState")
    ran = passed(work)
    if state:
        return ("resubmit", None) if state == "CANCELLED" and not ran else ("wait", None)
    if not forgotten(job_id):
        return "wait", None  # slurmctld did not answer: the job may still run; waiting finds out (or ends LOST)
    ended = accounted(job_id)
    if ended.get("JobState") not in TERMINAL:
        ended = from_work_dir(job_id, work)
    if not ended or (ended["JobState"] == "CANCELLED" and not ran):
        return "resubmit", None
    return "collect", ended
