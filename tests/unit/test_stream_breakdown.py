"""STREAM per VM and per rank, from crafted records, against hand-computed medians."""

from vnetbench.analysis import breakdown, report


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
    (row,) = breakdown.breakdowns(runs)
    assert row["repetitions"] == 3 and row["title"].startswith("stream: triad per VM and per rank")
    assert row["columns"]["summed MB/s"] == 1000
    assert row["columns"]["per VM MB/s"] == {"a": 300, "b": 700}
    assert row["columns"]["per rank MB/s"] == [100, 200, 300, 400]


def test_memory_policies_are_separate_rows_and_labelled():
    runs = [record("native", [50, 50], ["h", "h"], 100),
            record("native", [40, 40], ["h", "h"], 80, {"mem_policy": "interleave", "allow_single_node": True})]
    rows = breakdown.breakdowns(runs)  # sorted by configuration: the interleaved run's options sort first
    assert [breakdown.memory_label(r["run_options"]) for r in rows] == ["interleave (single node)", "local"]
    (grid,) = report.breakdown_grids(rows)
    assert grid.headers[:4] == ["topology", "ranks", "memory", "summed MB/s"]
    assert grid.rows[0][3] == "80" and grid.rows[1][4] == "h 100" and grid.rows[1][5] == "50, 50"
