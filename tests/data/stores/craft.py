"""Crafted result stores whose derived numbers were computed by hand (see the tests that read them).

``python tests/data/stores/craft.py`` rewrites the .jsonl files beside it; tests import
``record`` to build synthetic runs.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def record(kernel, topology, ranks, repetition, metrics, params=None, status="ok", bind="core", run_id=None,
           schema_version=1):
    """A record as the runner stores it, with only what report and compare read filled in."""
    ok = status == "ok"
    return {
        "schema_version": schema_version,
        "run_id": run_id or f"{kernel}-{topology}-{ranks}-{repetition}-{abs(hash(json.dumps(params))) % 10**6}",
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "kernel": kernel,
        "params": params if params is not None else {"steps": 20, "global": 64},
        "topology": {"name": topology, "backend": "local", "spec": None},
        "ranks": ranks,
        "repetition": repetition,
        "status": status,
        "metrics": metrics if ok else {},
        "validation": {"passed": ok, "detail": "crafted" if ok else "crafted failure"},
        "placement": [{"rank": r} for r in range(ranks)] if ok else [],
        "environment": {},
        "launch": {"notes": {"bind": bind}},
    }


def halo(topology, ranks, values, params=None, bind="core"):
    return [record("halo", topology, ranks, i, {"elapsed_s": v, "step_s": {"median": v / 20}}, params, bind=bind)
            for i, v in enumerate(values)]


def stream(topology, ranks, triads):
    return [record("stream", topology, ranks, i, {"bandwidth_mbps": {"copy": t * 0.9, "scale": t * 0.8,
                                                                     "add": t * 1.05, "triad": t}},
                   params={"n": 1000000})
            for i, t in enumerate(triads)]


def pingpong(topology, ranks, repetition, latencies, bandwidths, sizes=(1, 1024, 1048576)):
    rows = [{"bytes": s, "latency_us": lat, "bandwidth_mbps": bw} for s, lat, bw in zip(sizes, latencies, bandwidths)]
    return record("pingpong", topology, ranks, repetition, {"pair": [0, ranks - 1], "sizes": rows},
                  params={"min_size": sizes[0], "max_size": sizes[-1]})


def study_records():
    """halo on native and 2vm-2vswitch at 2 and 4 ranks, one timeout; stream; pingpong; a second halo setting."""
    out = []
    out += halo("native", 2, [10.0, 12.0, 11.0])
    out += halo("native", 4, [6.0, 6.0, 6.0])
    out.append(record("halo", "native", 4, 3, {}, status="timeout"))
    out += halo("2vm-2vswitch", 2, [11.0, 13.2, 12.1])
    out += halo("2vm-2vswitch", 4, [6.0, 9.0, 7.5])
    out += halo("native", 2, [40.0, 44.0], params={"steps": 80, "global": 64})
    out += stream("native", 1, [6000.0, 6200.0, 5800.0])
    out += stream("native", 2, [12000.0, 12000.0])
    out += stream("2vm-1vswitch", 2, [13000.0, 13200.0])
    out.append(pingpong("native", 2, 0, [1.0, 2.0, 100.0], [1.0, 500.0, 10000.0]))
    out.append(pingpong("native", 2, 1, [1.2, 2.2, 110.0], [1.2, 520.0, 9000.0]))
    out.append(pingpong("2vm-2vswitch", 2, 0, [30.0, 40.0, 9000.0], [0.1, 25.0, 110.0]))
    return out


def write(path, records, tail: bytes = b""):
    with open(path, "wb") as handle:
        for item in records:
            handle.write(json.dumps(item, sort_keys=True).encode() + b"\n")
        handle.write(tail)


def main():
    study = study_records()
    write(HERE / "study.jsonl", study)
    # line 2 corrupted, line 4 a foreign JSON object, the last line cut off by a killed writer
    lines = [json.dumps(r, sort_keys=True).encode() for r in study[:6]]
    lines.insert(1, b"{\"kernel\": \"halo\", \"ranks\": 2, garbage")
    lines.insert(3, b"{\"hello\": \"world\"}")
    damaged = b"\n".join(lines) + b"\n" + json.dumps(study[6], sort_keys=True).encode()[:57]
    (HERE / "damaged.jsonl").write_bytes(damaged)
    newer = record("halo", "native", 2, 0, {"elapsed_s": 1.0}, schema_version=99)
    write(HERE / "newer-schema.jsonl", halo("native", 2, [1.0]) + [newer])
    return 0


if __name__ == "__main__":
    sys.exit(main())
