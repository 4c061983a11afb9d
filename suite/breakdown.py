"""Where STREAM's summed bandwidth comes from: per VM and per rank, per configuration (pure)."""

import json
from collections import defaultdict
from statistics import median

from .results import run_options_of, topology_name


def stream(records: list[dict], op: str = "triad") -> list[dict]:
    """One row per (topology, ranks, run options) of passing stream runs, medians over repetitions.

    ``summed_mbps`` is the record's sum (all ranks' bytes over the slowest rank's time, as
    STREAM across VMs is summed in the study); ``per_vm_mbps`` adds up the ranks of each VM
    (by their own best times); ``per_rank_mbps`` is each rank's own bandwidth.
    """
    groups = defaultdict(list)
    for record in records:
        if record["kernel"] == "stream" and record["status"] == "ok" and record["metrics"].get("per_rank"):
            options = json.dumps(run_options_of(record), sort_keys=True)
            groups[(topology_name(record), record["ranks"], options)].append(record)
    rows = []
    for (topology, ranks, options), runs in sorted(groups.items()):
        per_vm, per_rank = defaultdict(list), defaultdict(list)
        for record in runs:
            where = {p["rank"]: p.get("vm") or p.get("hostname", "?") for p in record["placement"]}
            sums = defaultdict(float)
            for entry in record["metrics"]["per_rank"]:
                value = entry["bandwidth_mbps"][op]
                per_rank[entry["rank"]].append(value)
                sums[where.get(entry["rank"], "?")] += value
            for vm, total in sums.items():
                per_vm[vm].append(total)
        rows.append({
            "topology": topology, "ranks": ranks, "run_options": json.loads(options), "op": op,
            "repetitions": len(runs),
            "summed_mbps": median(r["metrics"]["bandwidth_mbps"][op] for r in runs),
            "per_vm_mbps": {vm: median(values) for vm, values in sorted(per_vm.items())},
            "per_rank_mbps": {str(rank): median(values) for rank, values in sorted(per_rank.items())},
        })
    return rows


def memory_label(options: dict) -> str:
    policy = options.get("mem_policy") or "local"
    return f"{policy} (single node)" if options.get("allow_single_node") and policy != "local" else policy


def grid(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    headers = ["topology", "ranks", "memory", "summed MB/s", "per VM MB/s", "per rank MB/s"]
    body = [[row["topology"], str(row["ranks"]), memory_label(row["run_options"]), f"{row['summed_mbps']:,.0f}",
             ", ".join(f"{vm} {value:,.0f}" for vm, value in row["per_vm_mbps"].items()),
             ", ".join(f"{value:,.0f}" for value in row["per_rank_mbps"].values())] for row in rows]
    return headers, body
