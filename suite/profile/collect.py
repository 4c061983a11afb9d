"""After a profiled job: the ranks' files (interposer.c wrote them at MPI_Finalize) as the record's ``profile``.

The summary is bounded whatever the job: the totals over all ranks always; per rank (the first ``MAX_RANKS``)
its calls, time in MPI and between calls, and its peers (the ``MAX_PEERS`` it sent most bytes to, the rest
together) by size bucket; the collectives by communicator size. A job whose ranks did not all write a profile
(a rank died before MPI_Finalize, an MPI linked statically, a program that never called MPI_Init, an MPI of
an ABI the interposer does not know) gets ``status`` "incomplete" or "unavailable" with the reason - never a
partial profile passed off as whole.
"""

import os
from pathlib import Path

from vnetbench.core.errors import SpecError
from vnetbench.core.files import open_regular, read_json_files

from .preload import FOLDER

MAX_RANKS = 64  # ranks with a section of their own
MAX_PEERS = 8  # peers per rank by name; the rest as "other"
MAX_FILE = 4 << 20  # a rank's summary: its tables are fixed-size, its peers at most 4096
# the size buckets: (label, the interposer's largest bucket in it); interposer.c's bucket b holds the sizes in
# (2^(b-1), 2^b], bucket 0 the sizes 0 and 1
BUCKETS = (("<=64B", 6), ("<=1KiB", 10), ("<=16KiB", 14), ("<=256KiB", 18), ("<=4MiB", 22), (">4MiB", 64))


def bucket_of(bucket: int) -> str:
    """The summary's bucket of the interposer's ``bucket``."""
    return next(label for label, top in BUCKETS if bucket <= top)


def bucket_of_size(size: int) -> str:
    """The summary's bucket of a message of ``size`` bytes."""
    return bucket_of(max(size - 1, 0).bit_length())


def read_ranks(job_dir) -> list[dict]:
    """The ranks' summaries (rank-N.json), unreadable files left out."""
    folder = Path(job_dir) / FOLDER
    try:
        names = sorted(name for name in os.listdir(folder) if name.startswith("rank-") and name.endswith(".json"))
    except OSError:
        return []
    return read_json_files(folder, names[:1 << 16], MAX_FILE, "rank")


def summarise_ranks(ranks: list[dict], world: int) -> dict:
    """The record's ``profile`` (without mode, interposer and trace) from the ranks' summaries, for a job of
    ``world`` ranks."""
    known = [r for r in ranks if not r.get("unsupported") and 0 <= r["rank"] < world and r.get("size") == world]
    by_rank = {r["rank"]: r for r in known}
    out: dict = {"ranks_profiled": len(by_rank)}
    if not by_rank:
        unsupported = next((r for r in ranks if r.get("unsupported")), None)
        if unsupported:
            why = f"{unsupported['unsupported']} ({(unsupported.get('library') or 'unnamed')[:80]})"
        elif ranks:
            why = f"the ranks' profiles name a world of {ranks[0].get('size')}, not {world}"
        else:
            why = ("no rank wrote a profile: the program did not call MPI_Init and MPI_Finalize with the "
                   "interposer loaded (an MPI linked statically, not an MPI program, ranks that died, or hosts "
                   "that do not share this host's files)")
        return {**out, "status": "unavailable", "reason": why}
    missing = sorted(set(range(world)) - set(by_rank))
    status = {"status": "ok"}
    if missing:
        status = {"status": "incomplete", "missing_ranks": missing[:32],
                  "reason": f"{len(missing)} of {world} ranks wrote no profile (ended before MPI_Finalize?)"}
    totals: dict = {}
    collectives: dict = {}
    per_rank = []
    for rank in sorted(by_rank):
        r = by_rank[rank]
        for name, (calls, nbytes, seconds) in r.get("calls", {}).items():
            t = totals.setdefault(name, [0, 0, 0.0])
            t[0], t[1], t[2] = t[0] + calls, t[1] + nbytes, t[2] + seconds
        for key, (calls, nbytes, seconds) in r.get("collectives", {}).items():
            name, _, size = key.rpartition("/")
            c = collectives.setdefault((name, int(size)), [0, 0, 0.0])
            c[0], c[1], c[2] = c[0] + calls, c[1] + nbytes, c[2] + seconds
        if len(per_rank) < MAX_RANKS:
            per_rank.append(_rank_section(r))
    elapsed = [by_rank[r]["elapsed_s"] for r in sorted(by_rank)]
    mpi = [by_rank[r]["mpi_s"] for r in sorted(by_rank)]
    cost = max(r["per_call_cost_s"] * r["wrapped_calls"] for r in by_rank.values())
    return {
        **out, **status,
        "abi": known[0].get("abi"), "library": known[0].get("library"),
        "elapsed_s": round(max(elapsed), 6),
        "mpi_pct": round(100 * sum(mpi) / sum(elapsed), 2) if sum(elapsed) > 0 else None,
        "calls": {name: {"calls": c, "bytes": b, "seconds": round(s, 6)}
                  for name, (c, b, s) in sorted(totals.items(), key=lambda kv: -kv[1][2])},
        "collectives": [{"call": name, "comm_size": size, "calls": c, "bytes": b, "seconds": round(s, 6)}
                        for (name, size), (c, b, s) in sorted(collectives.items())][:64],
        "buckets": [label for label, _ in BUCKETS],
        "ranks": per_rank,
        "cost": {"per_call_s": max(r["per_call_cost_s"] for r in by_rank.values()),
                 "calls_max": max(r["wrapped_calls"] for r in by_rank.values()),
                 "estimated_s": round(cost, 9),
                 "estimated_pct": round(100 * cost / max(elapsed), 3) if max(elapsed) > 0 else None,
                 "how": "the interposer's own bookkeeping per call, timed in each rank at MPI_Finalize, times its "
                        "calls (the largest rank); benchmarks/profile_cost.py measures it end to end"},
    }


def _rank_section(r: dict) -> dict:
    peers = {}
    for direction in ("sent", "received"):
        for peer, buckets in r.get(direction, {}).items():
            entry = peers.setdefault(peer, {"sent": {}, "received": {}})
            for bits, messages, nbytes in buckets:
                slot = entry[direction].setdefault(bucket_of(bits), [0, 0])
                slot[0] += messages
                slot[1] += nbytes
    ranked = sorted(peers.items(), key=lambda kv: -sum(v[1] for v in kv[1]["sent"].values()))
    shown = {peer: entry for peer, entry in ranked[:MAX_PEERS]}
    rest = ranked[MAX_PEERS:]
    if rest:
        other = {"sent": {}, "received": {}, "peers": len(rest)}
        for _, entry in rest:
            for direction in ("sent", "received"):
                for label, (messages, nbytes) in entry[direction].items():
                    slot = other[direction].setdefault(label, [0, 0])
                    slot[0] += messages
                    slot[1] += nbytes
        shown["other"] = other
    return {"rank": r["rank"], "elapsed_s": round(r["elapsed_s"], 6), "mpi_s": round(r["mpi_s"], 6),
            "compute_s": round(r["compute_s"], 6),
            "calls": {name: {"calls": c, "bytes": b, "seconds": round(s, 6)} for name, (c, b, s) in
                      sorted(r.get("calls", {}).items(), key=lambda kv: -kv[1][2])},
            "peers": shown, **({"lost_requests": r["lost_requests"]} if r.get("lost_requests") else {})}


def keep_trace(job_dir, world: int, store: str, run_id: str) -> dict:
    """The ranks' traces packed into one gzip file beside ``store``; the record's ``profile.trace``."""
    from . import trace

    folder = Path(job_dir) / FOLDER
    blobs, missing = [], []
    for rank in range(world):
        try:
            with open_regular(folder / f"rank-{rank}.trace", f"rank-{rank}.trace") as handle:
                blobs.append(handle.read())
        except (OSError, SpecError):
            missing.append(rank)
    if missing:
        return {"path": None, "reason": f"ranks {missing[:16]} wrote no trace"}
    store = Path(store)
    relative = Path(f"{store.name}.profiles") / f"{run_id}.trace.gz"
    target = store.parent / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    size = trace.pack(blobs, target)
    events, dropped = 0, 0
    for blob in blobs:
        _, _, _, _, _, count, lost, _ = trace.HEADER.unpack_from(blob, 0)
        events, dropped = events + count, dropped + lost
    return {"path": str(relative), "bytes": size, "events": events, "truncated": dropped > 0,
            **({"dropped": dropped} if dropped else {})}


# what the interposer sees; time in anything else counts as time between calls (computation)
COVERS = ("MPI_Init*, MPI_Finalize; point to point: blocking, nonblocking, synchronous, persistent, "
          "Sendrecv(_replace), Probe, Iprobe, Mprobe/Mrecv; completion: Wait*, Test*; blocking collectives; "
          "Comm_dup/split/create, Cart_create, Comm_free; the MPI-4 large-count twins (_c). Not seen: nonblocking "
          "and neighbourhood collectives, one-sided, MPI-IO, Fortran bindings, programs linked statically")


def observe(profiling, job_dir, world: int, run_id: str) -> dict:
    """The record's ``profile`` of a job that ran with ``profiling`` (a ``Profiling``)."""
    summary = summarise_ranks(read_ranks(job_dir), world)
    out = {"mode": profiling.mode, "interposer": {**profiling.describe(), "covers": COVERS}, **summary}
    if profiling.mode == "trace" and summary["status"] != "unavailable":
        try:
            out["trace"] = keep_trace(job_dir, world, profiling.store, run_id)
        except OSError as exc:
            out["trace"] = {"path": None, "reason": f"cannot keep the trace: {exc}"}
        if out["trace"].get("path") is None and out["status"] == "ok":
            out["status"], out["reason"] = "incomplete", out["trace"]["reason"]
    return out
