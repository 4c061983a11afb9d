"""report and compare stream the store: their own peak memory does not grow with the store's records.

Memory only, never time: the same commands on a store and on one four times its size, each run in
a child of its own whose VmHWM (its address space's peak resident memory) it writes as it exits.
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "data" / "stores"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import craft  # noqa: E402
from conftest import vnetbench  # noqa: E402
from store_memory import own_peak  # noqa: E402

RECORDS = 8_000
# what may grow from RECORDS to 4 x RECORDS: per record a value or a few (8 bytes each) and the digest that
# tells a duplicate (~70 bytes): ~3 MiB, and the allocator's slack. Holding the records, as report and
# compare did, took 2 to 5 KiB each here: +54 MiB (report) and +109 MiB (compare).
GROWTH_MIB = 15


def write_store(path: Path, count: int) -> None:
    """``count`` halo records over 40 configurations (4 topologies x 2 rank counts x 5 settings), 5 repetitions
    a run; the configurations stay, the repetitions grow with ``count``."""
    topologies = ("native", "1vm", "2vm-1vswitch", "2vm-2vswitch")
    with open(path, "w") as handle:
        for n in range(count):
            run, repetition = divmod(n, 5)
            config = run % 40
            record = craft.record("halo", topologies[config % 4], 2 << (config // 4 % 2), repetition,
                                  {"elapsed_s": 1.0 + (n % 7) / 100, "step_s": {"median": 0.05}},
                                  params={"steps": 20 + config // 8, "global": 64}, run_id=f"run-{run}")
            handle.write(json.dumps(record) + "\n")


@pytest.mark.parametrize("command", ["report", "compare"])
def test_peak_memory_does_not_grow_with_the_store(command, tmp_path):
    peaks = {}
    for count in (RECORDS, 4 * RECORDS):
        store = tmp_path / f"s{count}.jsonl"
        if not store.exists():
            write_store(store, count)
        args = ["report", "--store", store] if command == "report" else ["compare", store, store]
        peak, _, code, _, said = own_peak(args, tmp_path, timeout=120)
        assert code == 0 and "warning" not in said, said[-2000:]
        peaks[count] = peak
    print(f"{command}: peak resident MiB by records: {peaks}")
    assert peaks[4 * RECORDS] - peaks[RECORDS] < GROWTH_MIB, peaks


def test_the_store_is_read_whole_all_the_same(tmp_path):
    # the streamed report counts every record and shows every configuration: nothing was skipped to save memory
    store = tmp_path / "s.jsonl"
    write_store(store, 4000)
    data = json.loads(vnetbench("report", "--store", store, "--format", "json", check=0).stdout)
    assert data["records"] == 4000
    cells = [cell for table in data["tables"] for row in table["rows"] for cell in row["cells"]]
    assert len(cells) == 40 and sum(cell["n"] for cell in cells) == 4000
