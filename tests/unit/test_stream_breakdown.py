"""STREAM per VM and per rank, from crafted records, against hand-computed medians."""

from vnetbench import breakdown


def record(topology, triads, vms, summed, options=None):
    return {"kernel": "stream", "status": "ok", "ranks": len(triads), "topology": {"name": topology},
            "run_options": options or {},
            "placement": [{"rank": i, "vm": vm, "hostname": f"{topology}-{vm}"} for i, vm in enumerate(vms)],
            "metrics": {"bandwidth_mbps": {"triad": summed},
                        "per_rank": [{"rank": i, "bandwidth_mbps": {"triad": t}} for i, t in enumerate(triads)]}}


def test_per_vm_sums_its_ranks_and_medians_over_repetitions():
    runs = [record("2vm", [100, 200, 300, 400], ["a", "a", "b", "b"], 990),
            record("2vm", [110, 210, 310, 410], ["a", "a", "b", "b"], 1000),
            record("2vm", [90, 190, 290, 390], ["a", "a", "b", "b"], 1010),
            {**record("2vm", [1, 1, 1, 1], ["a", "a", "b", "b"], 4), "status": "failed"}]
    (row,) = breakdown.stream(runs)
    assert row["repetitions"] == 3
    assert row["summed_mbps"] == 1000
    assert row["per_vm_mbps"] == {"a": 300, "b": 700}
    assert row["per_rank_mbps"] == {"0": 100, "1": 200, "2": 300, "3": 400}


def test_memory_policies_are_separate_rows_and_labelled():
    runs = [record("native", [50, 50], ["h", "h"], 100),
            record("native", [40, 40], ["h", "h"], 80, {"mem_policy": "interleave", "allow_single_node": True})]
    rows = breakdown.stream(runs)  # sorted by configuration: the interleaved run's options sort first
    assert [breakdown.memory_label(r["run_options"]) for r in rows] == ["interleave (single node)", "local"]
    headers, body = breakdown.grid(rows)
    assert body[0][3] == "80" and body[1][4] == "h 100"
