"""What a profile of pingpong and of halo at 2 ranks must say, derived from the kernels' parameters alone (the
record's ``params``: what the ranks ran with), never from a run: every call's count and bytes, every peer's
messages and bytes by size bucket; and halo's trace, read back with vnetbench.profile.trace."""

import itertools
from collections import Counter

from vnetbench.profile import trace
from vnetbench.profile.collect import bucket_of_size

LARGE = 8192  # pingpong's boundary between small and large messages (its iteration counts change there)


def _calls(rank: dict) -> dict:
    return {name: (c["calls"], c["bytes"]) for name, c in rank["calls"].items()}


def _peer(rank: dict, peer: int, direction: str) -> dict:
    return {label: tuple(v) for label, v in rank["peers"].get(str(peer), {}).get(direction, {}).items()}


def _bucketed(messages: Counter) -> dict:
    """{bucket label: (messages, bytes)} of ``messages`` ({size in bytes: how many})."""
    out: dict = {}
    for size, n in messages.items():
        label = bucket_of_size(size)
        got = out.get(label, (0, 0))
        out[label] = (got[0] + n, got[1] + n * size)
    return out


def assert_common(record: dict, library: str) -> dict:
    profile = record["profile"]
    assert profile["status"] == "ok" and profile["ranks_profiled"] == 2, profile.get("reason")
    assert profile["library"].startswith(library), profile["library"]
    assert [r["rank"] for r in profile["ranks"]] == [0, 1]
    assert profile["cost"]["per_call_s"] > 0 and profile["cost"]["estimated_pct"] >= 0  # measured, not judged here
    for rank in profile["ranks"]:
        assert 0 < rank["mpi_s"] < rank["elapsed_s"] and abs(rank["mpi_s"] + rank["compute_s"] - rank["elapsed_s"]) \
            < 1e-3 * rank["elapsed_s"] + 1e-6
    return profile


def assert_pingpong_profile(record: dict, typed: list[str], library: str) -> None:
    p = record["params"]
    profile = assert_common(record, library)
    assert record["ranks"] == 2 and p["min_size"] == 1 and p["max_size"] & (p["max_size"] - 1) == 0, p
    sizes = [1 << i for i in range(p["max_size"].bit_length())]
    rounds, windows = {}, {}  # size -> latency round trips (warm-up included), bandwidth windows
    for size in sizes:
        if size > LARGE:
            rounds[size] = p["large_iterations"] + p["large_warmup"]
            windows[size] = max(1, p["bw_iterations"] // 5) + max(1, p["large_warmup"])
        else:
            rounds[size] = p["iterations"] + p["warmup"]
            windows[size] = p["bw_iterations"] + max(1, p["warmup"] // 10)
    w = p["window"]
    latency_bytes = sum(s * rounds[s] for s in sizes)
    acks = sum(windows.values())
    streamed = sum(s * w * windows[s] for s in sizes)
    ping, pong = (_calls(r) for r in profile["ranks"])
    # rank 0 pings and streams; rank 1 answers, receives the windows, acknowledges each (4 bytes)
    assert ping["MPI_Send"] == (sum(rounds.values()), latency_bytes)
    assert ping["MPI_Recv"] == (sum(rounds.values()) + acks, latency_bytes + 4 * acks)
    assert ping["MPI_Startall"] == (acks, streamed) and ping["MPI_Waitall"] == (acks, 0)
    assert ping["MPI_Send_init"] == (w * len(sizes), 0) and ping["MPI_Request_free"] == (w * len(sizes), 0)
    assert pong["MPI_Recv"] == (sum(rounds.values()), latency_bytes)
    assert pong["MPI_Send"] == (sum(rounds.values()) + acks, latency_bytes + 4 * acks)
    assert pong["MPI_Startall"] == (acks, 0) and pong["MPI_Waitall"] == (acks, streamed)
    assert pong["MPI_Recv_init"] == (w * len(sizes), 0) and "MPI_Send_init" not in pong
    # one barrier per size, one at the kernel's start; on the world (2 ranks)
    assert ping["MPI_Barrier"] == pong["MPI_Barrier"] == (len(sizes) + 1, 0)
    assert {"call": "MPI_Barrier", "comm_size": 2, "calls": 2 * (len(sizes) + 1), "bytes": 0} == {
        k: v for k, v in next(c for c in profile["collectives"] if c["call"] == "MPI_Barrier").items()
        if k != "seconds"}
    there = _bucketed(Counter({s: rounds[s] + w * windows[s] for s in sizes}))
    back = _bucketed(Counter({s: rounds[s] for s in sizes}) + Counter({4: acks}))
    assert _peer(profile["ranks"][0], 1, "sent") == there and _peer(profile["ranks"][1], 0, "received") == there
    assert _peer(profile["ranks"][1], 0, "sent") == back and _peer(profile["ranks"][0], 1, "received") == back
    assert set(profile["ranks"][0]["peers"]) == {"1"} and set(profile["ranks"][1]["peers"]) == {"0"}


def halo_messages(p: dict) -> dict:
    """For halo at 2 ranks (process grid 2x1x1): {peer: Counter(message bytes)} one rank sends in one step,
    peer "self" or "other"; the 26 directions (or 6), each message the cells of the block's slab in that direction."""
    assert not p["weak"]
    h = p["halo_width"]
    block = [p["global_grid"][0] // 2, p["global_grid"][1], p["global_grid"][2]]
    assert p["global_grid"][0] % 2 == 0
    out = {"self": Counter(), "other": Counter()}
    for offset in itertools.product((-1, 0, 1), repeat=3):
        if offset == (0, 0, 0) or (p["neighbours"] == 6 and sum(map(abs, offset)) != 1):
            continue
        cells = 1
        for o, n in zip(offset, block):
            cells *= h if o else n
        out["other" if offset[0] else "self"][8 * cells] += 1
    return out


def assert_halo_profile(record: dict, typed: list[str], library: str, store) -> None:
    p = record["params"]
    profile = assert_common(record, library)
    steps, per_step = p["steps"], halo_messages(p)
    n = sum(sum(c.values()) for c in per_step.values())
    step_bytes = sum(size * k for c in per_step.values() for size, k in c.items())
    reductions = steps // p["reduce_every"]
    for index, rank in enumerate(profile["ranks"]):
        calls = _calls(rank)
        assert calls["MPI_Startall"] == (2 * steps, steps * step_bytes)  # receives, then sends, each step
        assert calls["MPI_Waitall"] == (steps, steps * step_bytes)  # the receives' bytes, counted at completion
        assert calls["MPI_Send_init"] == calls["MPI_Recv_init"] == (n, 0) and calls["MPI_Request_free"] == (2 * n, 0)
        assert calls["MPI_Cart_create"][0] == 1 and calls["MPI_Comm_free"][0] == 1
        # the energy and a 1 each reduction (16 bytes), then the report's per-step times and phases (4 doubles)
        assert calls["MPI_Allreduce"] == (reductions + 2, 16 * reductions + 8 * steps + 32)
        assert calls["MPI_Barrier"] == (2, 0)
        for peer, who in ((index, "self"), (1 - index, "other")):
            expect = _bucketed(Counter({size: k * steps for size, k in per_step[who].items()}))
            assert _peer(rank, peer, "sent") == expect == _peer(rank, peer, "received"), (index, who)
    kept = profile["trace"]
    assert kept["path"].endswith(".trace.gz") and not kept["truncated"] and kept["bytes"] > 0
    got = trace.load_trace(record, store)
    assert got.ranks == 2 and not got.truncated and all(e > 0 for e in got.elapsed)
    assert sum(len(got.events(rank)) for rank in range(2)) == kept["events"]
    for rank in range(2):
        events = got.events(rank)
        assert all(a.t0 <= a.t1 <= b.t0 for a, b in zip(events, events[1:]))
        starts = [e for e in events if e.call == "MPI_Startall"]
        assert len(starts) == 2 * steps
        sends = [s for e in starts for s in e.sends]
        posted = [r for e in starts for r in e.recvs]
        assert len(sends) == len(posted) == n * steps and sum(s[1] for s in sends) == steps * step_bytes
        assert {s[0] for s in sends} == {0, 1} and all(s[3] >= 0 for s in sends)
        done = [c for e in events if e.call == "MPI_Waitall" for c in e.completes]
        assert sorted(c[0] for c in done) == sorted(s[3] for s in sends + posted)  # every request completed once
        assert sum(c[2] for c in done) == steps * step_bytes
        reduced = [e for e in events if e.call == "MPI_Allreduce"]
        assert [e.comm for e in reduced] == [(0, 1)] * (reductions + 2) and reduced[0].nbytes == 16
