"""The result record: one JSON object per run and repetition, with a schema version.

Rank 0 builds it (``make_record``); the launcher completes it; ``check_record`` guards what
enters a store (``vnetbench ingest`` and every append).
"""

import datetime
import os

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "timeout", "invalid")

# field -> allowed JSON types; every record has all of them
REQUIRED = {
    "schema_version": (int,),
    "run_id": (str,),
    "started_at": (str,),
    "kernel": (str,),
    "params": (dict,),
    "topology": (dict,),
    "ranks": (int,),
    "repetition": (int,),
    "status": (str,),
    "metrics": (dict,),
    "validation": (dict,),
    "placement": (list,),
    "environment": (dict,),
}


def new_run_id() -> str:
    # 64 random bits in hex, as uuid4().hex[:16] gave (uuid's import, with platform's, was 4 ms of every run)
    return os.urandom(8).hex()


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def make_record(*, kernel, params, ranks, metrics, validation, placement, environment,
                topology=None, run_id=None, repetition=0, started_at=None, status=None, **extra) -> dict:
    if status is None:
        status = "ok" if validation.get("passed") else "invalid"
    record = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id or new_run_id(),
        "started_at": started_at or now(),
        "kernel": kernel,
        "params": params,
        "topology": topology or {"name": "direct", "spec": None},
        "ranks": ranks,
        "repetition": repetition,
        "status": status,
        "metrics": metrics,
        "validation": validation,
        "placement": placement,
        "environment": environment,
    }
    record.update(extra)
    return record


def check_record(record) -> list[str]:
    """What is wrong with a record, as short phrases naming the field; empty when it is sound."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    problems = []
    for field, types in REQUIRED.items():
        if field not in record:
            problems.append(f"{field}: missing")
        elif not isinstance(record[field], types) or isinstance(record[field], bool) and bool not in types:
            problems.append(f"{field}: expected {'/'.join(t.__name__ for t in types)}")
    if problems:
        return problems
    if record["schema_version"] > SCHEMA_VERSION:
        problems.append(f"schema_version: {record['schema_version']} is newer than this vnetbench "
                        f"reads (<= {SCHEMA_VERSION})")
    if record["status"] not in STATUSES:
        problems.append(f"status: {record['status']!r} is not one of {', '.join(STATUSES)}")
    if record["ranks"] < 1:
        problems.append("ranks: must be >= 1")
    if not isinstance(record["validation"].get("passed"), bool):
        problems.append("validation.passed: expected true or false")
    if record["status"] == "ok":
        if not record["validation"].get("passed"):
            problems.append("status: 'ok' but validation did not pass")
        if len(record["placement"]) != record["ranks"]:
            problems.append(f"placement: {len(record['placement'])} entries for {record['ranks']} ranks")
    return problems


def failure_record(*, kernel, params, ranks, status, detail, topology=None, run_id=None, repetition=0,
                   started_at=None, environment=None, **extra) -> dict:
    """The record of a run that produced no result of its own (crashed, killed, timed out)."""
    return make_record(kernel=kernel, params=params, ranks=ranks, metrics={},
                       validation={"passed": False, "detail": detail}, placement=[],
                       environment=environment or {}, topology=topology, run_id=run_id,
                       repetition=repetition, started_at=started_at, status=status, **extra)
