"""``vnetbench predict``'s bad input: one line naming the cause, exit 2, nothing started - over a store of hand-made
records and a hand-made trace (the trace's stored format, vnetbench.profile.trace)."""

import json
import struct

import pytest

from vnetbench.cli import main
from vnetbench.predict import calibration, model
from vnetbench.profile import trace as tracefile
from vnetbench.topologies.local import NativeTopology
from vnetbench.topologies.model.presets import PRESETS

NATIVE = NativeTopology(PRESETS["native"])
FLAT = [{"bytes": 8, "oneway_us": 1.0, "bandwidth_mbps": 1000.0},
        {"bytes": 1 << 20, "oneway_us": 500.0, "bandwidth_mbps": 2000.0}]


def rank_blob(rank: int, size: int, events, truncated=False, elapsed=1.0) -> bytes:
    """One rank's part as the interposer writes it: ``events`` are (call name, t0, t1, sends [(peer, bytes, tag)])."""
    names = sorted({e[0] for e in events})
    head = tracefile.HEADER.pack(tracefile.RANK_MAGIC, 1, rank, size, int(truncated), len(events), 0, elapsed)
    body = struct.pack("<I", len(names)) + b"".join(bytes([len(n)]) + n.encode() for n in names)
    body += struct.pack("<IQ", 0, 0)
    packed = b""
    for call, t0, t1, items in events:
        packed += tracefile.EVENT.pack(names.index(call), len(items), -1, t0, t1, 0, -1, 0)
        for kind, peer, nbytes, tag in items:
            packed += tracefile.ITEM.pack(kind, peer, nbytes, tag, -1)
    return head + body + struct.pack("<Q", len(packed)) + packed + tracefile.END_MAGIC


def write_trace(path, truncated=False):
    blobs = [rank_blob(0, 2, [("MPI_Send", 0.1, 0.2, [(0, 1, 800, 0)])], truncated),
             rank_blob(1, 2, [("MPI_Recv", 0.0, 0.2, [(1, 0, 800, 0)])], truncated)]
    tracefile.pack(blobs, path)


def profiled(run_id="p1", kernel="halo", ranks=2, trace_path="s.jsonl.profiles/p1.trace.gz", truncated=False,
             mode="trace"):
    profile = {"mode": mode}
    if mode == "trace":
        profile["trace"] = {"path": trace_path, "bytes": 1, "events": 2, "truncated": truncated}
    return {"schema_version": 1, "run_id": run_id, "started_at": "2026-11-29T00:00:00.000+00:00", "kernel": kernel,
            "params": {}, "topology": {"name": "native", "backend": "local", "spec": NATIVE.to_dict()},
            "ranks": ranks, "repetition": 0, "status": "ok", "metrics": {"elapsed_s": 1.0},
            "validation": {"passed": True}, "placement": [{}] * ranks, "environment": {}, "profile": profile}


def calibrated(spec_hash=None, name="native"):
    return {"schema_version": 1, "run_id": "c1", "started_at": "2099-01-01T00:00:00.000+00:00", "kernel": "calibration",
            "params": {}, "topology": {"name": name}, "ranks": 2, "repetition": 0, "status": "ok", "metrics": {},
            "validation": {"passed": True}, "placement": [{}, {}], "environment": {},
            "calibration": {"topology": name, "spec_hash": spec_hash or calibration.spec_hash(NATIVE), "mpi": None,
                            "paths": {"host": {"sizes": FLAT}}, "allreduce": {}}}


@pytest.fixture
def store(tmp_path):
    (tmp_path / "s.jsonl.profiles").mkdir()
    write_trace(tmp_path / "s.jsonl.profiles" / "p1.trace.gz")

    def make(*records):
        path = tmp_path / "s.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return str(path)
    return make


def refused(capsys, store, *extra, match):
    code = main(["predict", "--profile", "p1", "--topology", "native", "--store", store, "--no-record", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and match in err, err


def test_a_good_profile_is_predicted(capsys, store):
    path = store(profiled(), calibrated())
    assert main(["predict", "--profile", "p1", "--topology", "native", "--store", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overhead_pct"] == 0 and out["elapsed_s"] == out["baseline_elapsed_s"] == 1.0
    assert out["rests_on"] == {"topology": ["c1"], "baseline": ["c1"]} and out["extrapolated"] is False
    # rank 0 sends 800 bytes at 0.1 and returns when they left; rank 1's receive ends when they arrive; each then
    # computes 0.8 s to its end
    curve = model.Curve(FLAT)
    assert out["replay"]["baseline_s"] == pytest.approx(0.9 + max(curve.oneway(800), curve.occupancy(800)))
    assert out["breakdown"]["calls"]["MPI_Send"] == {"calls": 1, "bytes": 800,
                                                     "seconds": pytest.approx(curve.occupancy(800)),
                                                     "baseline_seconds": pytest.approx(curve.occupancy(800))}


def test_a_profile_of_another_program_or_rank_count(capsys, store):
    path = store(profiled(), calibrated())
    refused(capsys, path, "--program", "md", match="--program: the profile p1 is of halo, not md")
    refused(capsys, path, "--ranks", "4", match="--ranks: the profile p1 ran 2 ranks, not 4")


def test_a_run_that_was_not_profiled_or_has_no_trace(capsys, store):
    refused(capsys, store(calibrated()), match="--profile: no run p1 in")
    refused(capsys, store(profiled(mode="summary"), calibrated()), match="has a profile summary but no trace")
    refused(capsys, store(profiled(trace_path="gone.trace.gz"), calibrated()), match="no such trace file")


def test_a_truncated_trace(capsys, store, tmp_path):
    refused(capsys, store(profiled(truncated=True), calibrated()), match="is truncated")
    write_trace(tmp_path / "s.jsonl.profiles" / "p1.trace.gz", truncated=True)  # the record does not know
    refused(capsys, store(profiled(), calibrated()), match="is truncated")
    whole = (tmp_path / "s.jsonl.profiles" / "p1.trace.gz").read_bytes()
    (tmp_path / "s.jsonl.profiles" / "p1.trace.gz").write_bytes(whole[:len(whole) // 2])
    refused(capsys, store(profiled(), calibrated()), match="truncated or corrupt")


def test_a_missing_or_stale_calibration(capsys, store):
    refused(capsys, store(profiled()), match="no calibration of native")
    refused(capsys, store(profiled(), calibrated(spec_hash="0" * 16)), match="the calibration of native is stale")


def test_calibrate_refuses_an_unknown_topology_before_anything_starts(capsys, tmp_path):
    assert main(["calibrate", "--topology", "nosuch.yaml", "--store", str(tmp_path / "s.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "vnetbench: error: --topology: no such file: nosuch.yaml"
    assert not (tmp_path / "s.jsonl").exists()
