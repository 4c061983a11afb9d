"""Where a headline number comes from, per configuration, as the kernel declares it
(STREAM: the summed bandwidth per VM and per rank). Pure: records in, rows out."""

import json
from collections import defaultdict

from . import metrics as registry
from .records import run_options_of, topology_name


def breakdowns(records: list[dict]) -> list[dict]:
    """One row per (kernel, topology, ranks, run options) of passing runs whose kernel declares a breakdown."""
    groups = defaultdict(list)
    for record in records:
        if record["status"] == "ok":
            options = json.dumps(run_options_of(record), sort_keys=True)
            groups[(record["kernel"], topology_name(record), record["ranks"], options)].append(record)
    rows = []
    for (kernel, topology, ranks, options), runs in sorted(groups.items(), key=lambda kv: (registry.order(kv[0][0]),
                                                                                          kv[0][1:])):
        found = registry.breakdown(kernel, runs)
        if found:
            title, columns = found
            rows.append({"kernel": kernel, "title": title, "topology": topology, "ranks": ranks,
                         "run_options": json.loads(options), "repetitions": len(runs), "columns": columns})
    return rows


def memory_label(options: dict) -> str:
    policy = options.get("mem_policy") or "local"
    return f"{policy} (single node)" if options.get("allow_single_node") and policy != "local" else policy
