"""Overhead N/A: a cell whose ranks outnumbered their cpus (a VM's vCPUs, or the host's cores) is
not compared with a baseline that did not, nor the other way round; report says why."""

import csv
import io
import json
import sys
from pathlib import Path

from vnetbench.analysis import report, tables

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402


def in_vm(records, vcpus_per_vm: dict[str, int]):
    """Place each record's ranks in VMs as the netns backend records them (vm, vm_cpus), block order."""
    slots = [vm for vm, n in vcpus_per_vm.items() for _ in range(n)]
    for record in records:
        vms = list(vcpus_per_vm)
        per = -(-record["ranks"] // len(vms))
        record["placement"] = [{"rank": r, "vm": vms[r // per], "vm_cpus": list(range(vcpus_per_vm[vms[r // per]]))}
                               for r in range(record["ranks"])]
        record["launch"]["notes"] = {"bind": "none", "oversubscribed": len(slots) < record["ranks"], "cores": 2}
    return records


def native(ranks, values, cores=2):
    records = craft.halo("native", ranks, values)
    for record in records:
        record["launch"]["notes"] = {"bind": "core" if ranks <= cores else "none", "cores": cores,
                                     "oversubscribed": ranks > cores}
    return records


def cell(table, topology, ranks):
    (row,) = [r for r in table.rows if r.topology == topology]
    return row.cells[ranks]


def test_oversubscribed_vm_cell_is_na_with_the_reason():
    runs = (native(2, [1.0, 1.0]) + in_vm(craft.halo("1vm", 2, [1.9, 1.9]), {"vm1": 1})
            + in_vm(craft.halo("2vm-1vswitch", 2, [1.2, 1.2]), {"vm1": 1, "vm2": 1}))
    (table,) = tables.build(runs)
    one = cell(table, "1vm", 2)
    assert one.overhead_pct is None and one.overhead_na == "oversubscribed: 2 ranks on 1 vCPU in VM vm1"
    two = cell(table, "2vm-1vswitch", 2)  # one rank per 1-vCPU VM: fits, compared
    assert two.overhead_na is None and abs(two.overhead_pct - 20.0) < 1e-9
    headers, body = report.study_grid(table)
    assert body[[r[0] for r in body].index("1vm")][headers.index("overhead 2")] == "N/A"
    text = report.render_study([table], "table", baseline="native")
    assert "overhead N/A for 1vm x2: oversubscribed: 2 ranks on 1 vCPU in VM vm1" in text
    (row,) = [r for r in csv.DictReader(io.StringIO(report.render_study([table], "csv"))) if r["topology"] == "1vm"]
    assert row["overhead_pct"] == "" and row["overhead_na"].startswith("oversubscribed")
    data = json.loads(report.render_study([table], "json"))
    (vm,) = [r for r in data["tables"][0]["rows"] if r["topology"] == "1vm"]
    assert vm["cells"][0]["overhead_na"] and vm["cells"][0]["overhead_pct"] is None


def test_oversubscribed_baseline_is_not_compared_with_a_cell_that_fits():
    runs = native(4, [3.0]) + in_vm(craft.halo("4vm-4vswitch", 4, [2.0]), {f"vm{i}": 1 for i in range(4)})
    (table,) = tables.build(runs)
    fits = cell(table, "4vm-4vswitch", 4)
    assert fits.overhead_pct is None and fits.overhead_na == "native oversubscribed: 4 ranks on 2 cores"


def test_records_that_say_nothing_are_taken_as_fitting():
    (table,) = tables.build(craft.halo("native", 2, [1.0]) + craft.halo("other", 2, [1.5]))
    assert cell(table, "other", 2).overhead_pct == 50.0 and cell(table, "other", 2).overhead_na is None
    assert tables.oversubscription({"ranks": 2, "placement": "odd", "launch": {"notes": []}}) is None
