"""The profiler's pure parts: the trace's format read back (and refused when cut or corrupt), the summary of the
ranks' files (a missing rank, an unknown ABI, no files at all), the size buckets, the --profile modes."""

import gzip
import struct

import pytest

from vnetbench import profile
from vnetbench.core.errors import UsageError
from vnetbench.profile import collect, trace

NAMES = ["MPI_Send", "MPI_Irecv", "MPI_Wait", "MPI_Allreduce"]


def rank_blob(rank: int, size: int, events: list, comms=((0, 1),), truncated=False, end=b"VNBTRC01"[:0]) -> bytes:
    """A rank's part as interposer.c's write_trace lays it out (trace.py's docstring)."""
    out = trace.HEADER.pack(b"VNBTRC01", 1, rank, size, int(truncated), len(events), 3 if truncated else 0, 1.5)
    out += struct.pack("<I", len(NAMES)) + b"".join(bytes([len(n)]) + n.encode() for n in NAMES)
    table = b"".join(struct.pack(f"<i{len(c)}i", len(c), *c) for c in comms)
    out += struct.pack("<IQ", len(comms), len(table)) + table
    body = b""
    for call, t0, t1, items, comm, nbytes, root in events:
        body += trace.EVENT.pack(NAMES.index(call), len(items), comm, t0, t1, nbytes, root, 0)
        body += b"".join(trace.ITEM.pack(*item) for item in items)
    return out + struct.pack("<Q", len(body)) + body + (end or b"VNBTRCND")


def two_ranks():
    send = ("MPI_Send", 0.1, 0.2, [(0, 1, 800, 7, -1)], -1, 0, -1)
    irecv = ("MPI_Irecv", 0.1, 0.11, [(1, -1, 800, 7, 0)], -1, 0, -1)
    wait = ("MPI_Wait", 0.12, 0.2, [(2, 0, 800, 7, 0)], -1, 0, -1)
    reduce_ = ("MPI_Allreduce", 0.3, 0.4, [], 0, 16, -1)
    return [rank_blob(0, 2, [send, reduce_]), rank_blob(1, 2, [irecv, wait, reduce_])]


def test_a_trace_reads_back_event_by_event(tmp_path):
    path = tmp_path / "t.trace.gz"
    trace.pack(two_ranks(), path)
    got = trace.load_trace(path)
    assert got.ranks == 2 and not got.truncated and got.elapsed == [1.5, 1.5]
    first, reduced = got.events(0)
    assert first == trace.Event("MPI_Send", 0.1, 0.2, ((1, 800, 7, -1),), (), (), None, 0, -1)
    assert reduced.comm == (0, 1) and reduced.nbytes == 16 and reduced.call == "MPI_Allreduce"
    posted, waited, _ = got.events(1)
    assert posted.recvs == ((-1, 800, 7, 0),) and waited.completes == ((0, 0, 800),)


def test_a_record_names_its_trace_relative_to_the_store(tmp_path):
    store = tmp_path / "r.jsonl"
    (tmp_path / "r.jsonl.profiles").mkdir()
    trace.pack(two_ranks(), tmp_path / "r.jsonl.profiles" / "x.trace.gz")
    record = {"run_id": "x", "profile": {"trace": {"path": "r.jsonl.profiles/x.trace.gz"}}}
    assert trace.load_trace(record, store).ranks == 2
    with pytest.raises(trace.TraceError, match="no trace"):
        trace.load_trace({"run_id": "y", "profile": {"mode": "summary"}}, store)


def test_a_truncated_flag_is_read(tmp_path):
    blobs = [rank_blob(0, 1, [], truncated=True)]
    trace.pack(blobs, tmp_path / "t.gz")
    got = trace.load_trace(tmp_path / "t.gz")
    assert got.truncated and got.dropped == [3]


@pytest.mark.parametrize("damage, phrase", [
    (lambda data: data[: len(data) // 2], "truncated or corrupt"),  # the gzip stream cut
    (lambda data: b"not gzip at all", "truncated or corrupt"),
])
def test_a_cut_or_corrupt_file_is_refused(tmp_path, damage, phrase):
    path = tmp_path / "t.gz"
    trace.pack(two_ranks(), path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(trace.TraceError, match=phrase) as caught:
        trace.load_trace(path)
    assert isinstance(caught.value, UsageError) and "\n" not in str(caught.value)


@pytest.mark.parametrize("blobs, phrase", [
    ([rank_blob(0, 2, [], end=b"XXXXXXXX")], "no end mark"),
    ([rank_blob(0, 2, [])], "rank 0 of 2, not 0 of 1"),  # one rank's part of a world of two
    ([rank_blob(1, 2, []), rank_blob(0, 2, [])], "says rank 1"),
    ([rank_blob(0, 1, [])[:30]], "truncated or corrupt"),
])
def test_a_whole_gzip_with_a_bad_rank_part_is_refused(tmp_path, blobs, phrase):
    path = tmp_path / "t.gz"
    trace.pack(blobs, path)
    with pytest.raises(trace.TraceError, match=phrase):
        trace.load_trace(path)


def test_parts_cut_inside_the_container_are_refused(tmp_path):
    path = tmp_path / "t.gz"
    blob = two_ranks()[0]
    with gzip.open(path, "wb") as out:
        out.write(trace.MAGIC + struct.pack("<II", 1, 2) + struct.pack("<Q", len(blob)) + blob)
    with pytest.raises(trace.TraceError, match="cut short"):
        trace.load_trace(path)


def rank_file(rank, size=2, **extra):
    return {"rank": rank, "size": size, "abi": "openmpi", "library": "Open MPI v5.0", "elapsed_s": 2.0,
            "mpi_s": 0.5, "compute_s": 1.5, "per_call_cost_s": 5e-8, "wrapped_calls": 10,
            "calls": {"MPI_Send": [4, 4000, 0.25], "MPI_Allreduce": [2, 16, 0.25]},
            "collectives": {"MPI_Allreduce/2": [2, 16, 0.25]},
            "sent": {str(1 - rank): [[6, 3, 96], [10, 1, 1000]]}, "received": {}, **extra}


def test_the_summary_of_whole_ranks():
    got = collect.summarise_ranks([rank_file(0), rank_file(1)], 2)
    assert got["status"] == "ok" and got["ranks_profiled"] == 2 and got["mpi_pct"] == 25.0
    assert got["calls"]["MPI_Send"] == {"calls": 8, "bytes": 8000, "seconds": 0.5}
    assert got["collectives"] == [{"call": "MPI_Allreduce", "comm_size": 2, "calls": 4, "bytes": 32, "seconds": 0.5}]
    assert got["ranks"][0]["peers"] == {"1": {"sent": {"<=64B": [3, 96], "<=1KiB": [1, 1000]}, "received": {}}}
    assert got["cost"]["estimated_s"] == pytest.approx(5e-7)


def test_a_missing_rank_makes_the_profile_incomplete_and_none_unavailable():
    got = collect.summarise_ranks([rank_file(0)], 2)
    assert got["status"] == "incomplete" and got["missing_ranks"] == [1] and "1 of 2 ranks" in got["reason"]
    none = collect.summarise_ranks([], 2)
    assert none["status"] == "unavailable" and "did not call MPI_Init" in none["reason"]
    other = collect.summarise_ranks([rank_file(0, 1)], 2)
    assert other["status"] == "unavailable" and "world of 1, not 2" in other["reason"]
    unknown = collect.summarise_ranks([{"rank": -1, "size": -1, "unsupported": "the MPI library's ABI is not one the "
                                  "profiler knows", "library": "SomeMPI 1.0"}], 2)
    assert unknown["status"] == "unavailable" and "SomeMPI" in unknown["reason"]


def test_peers_past_the_bound_are_summed_as_other():
    sent = {str(peer): [[7, 1, 10 * peer]] for peer in range(1, 20)}
    got = collect.summarise_ranks([rank_file(0, 20, sent=sent)], 20)
    peers = got["ranks"][0]["peers"]
    assert len(peers) == collect.MAX_PEERS + 1 and peers["other"]["peers"] == 19 - collect.MAX_PEERS
    assert "19" in peers and "1" not in peers  # the peers sent the most bytes are named


@pytest.mark.parametrize("size, label", [(0, "<=64B"), (64, "<=64B"), (65, "<=1KiB"), (1024, "<=1KiB"),
                                         (1025, "<=16KiB"), (4 << 20, "<=4MiB"), ((4 << 20) + 1, ">4MiB")])
def test_size_buckets(size, label):
    assert collect.bucket_of_size(size) == label


def test_modes_and_a_trace_without_a_store():
    profile.check_mode("summary")
    profile.check_mode(None)
    with pytest.raises(UsageError, match="--profile: 'full' is not a mode; allowed: summary, trace"):
        profile.check_mode("full")
    with pytest.raises(UsageError, match="--profile trace: .* give --store"):
        profile.prepare("trace", None)
