"""report names each store line whose declared metrics are not numbers (they are left out of the tables)."""

import sys
from pathlib import Path

from conftest import vnetbench

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "data" / "stores"))
import craft  # noqa: E402


def test_lines_with_metrics_that_are_not_numbers_are_named(tmp_path):
    good = craft.halo("native", 2, [1.0, 1.1])
    text = craft.record("halo", "native", 2, 2, {"elapsed_s": "fast", "step_s": {"median": 0.1}}, run_id="bad-text")
    nan = craft.record("halo", "native", 2, 3, {"elapsed_s": float("nan")}, run_id="bad-nan")
    store = tmp_path / "s.jsonl"
    craft.write(store, [good[0], text, good[1], nan])
    proc = vnetbench("report", "--store", store, check=0)
    named = [line for line in proc.stderr.splitlines() if "metrics not numbers" in line]
    assert named == [
        f"vnetbench: warning: metrics not numbers, left out: {store}:2: halo run bad-text repetition 3: elapsed_s='fast'",
        f"vnetbench: warning: metrics not numbers, left out: {store}:4: halo run bad-nan repetition 4: elapsed_s=nan"]
    assert "1.05 +-4.8% x2" in proc.stdout  # the two sound runs make the cell
