"""Where a headline number comes from, per configuration, as the kernel declares it
(STREAM: the summed bandwidth per VM and per rank). Pure: records in, rows out."""

import json
from collections import defaultdict

from . import metrics as registry
from .records import run_options_of, topology_name


class Breakdowns:
    """The breakdown rows, a record at a time. A kernel's breakdown reads whole runs, so the passing
    runs of kernels that declare one are kept, as ``keep`` trims them; the others are not kept."""

    def __init__(self, keep=None):
        self.keep = keep
        self.groups: dict[tuple, list[dict]] = defaultdict(list)

    def add(self, record: dict) -> None:
        if record["status"] != "ok" or not registry.declares_breakdown(record["kernel"]):
            return
        options = json.dumps(run_options_of(record), sort_keys=True)
        key = (record["kernel"], topology_name(record), record["ranks"], options)
        self.groups[key].append(self.keep(record) if self.keep else record)

    def rows(self) -> list[dict]:
        """One row per (kernel, topology, ranks, run options) of passing runs whose kernel declares a breakdown."""
        rows = []
        for (kernel, topology, ranks, options), runs in sorted(self.groups.items(),
                                                              key=lambda kv: (registry.order(kv[0][0]), kv[0][1:])):
            found = registry.breakdown(kernel, runs)
            if found:
                title, columns = found
                rows.append({"kernel": kernel, "title": title, "topology": topology, "ranks": ranks,
                             "run_options": json.loads(options), "repetitions": len(runs), "columns": columns})
        return rows


def breakdowns(records) -> list[dict]:
    """One row per (kernel, topology, ranks, run options) of passing runs whose kernel declares a breakdown."""
    parts = Breakdowns()
    for record in records:
        parts.add(record)
    return parts.rows()


def memory_label(options: dict) -> str:
    policy = options.get("mem_policy") or "local"
    return f"{policy} (single node)" if options.get("allow_single_node") and policy != "local" else policy
