"""vnetbench compare: a synthetic 30% regression is flagged, a rerun from the same distribution is not."""

import json
import random
import sys
from pathlib import Path

import pytest

from conftest import vnetbench
from vnetbench.analysis import compare
from vnetbench.analysis.stats import welch

STORES = Path(__file__).resolve().parent.parent / "data" / "stores"
sys.path.insert(0, str(STORES))
import craft  # noqa: E402


def halo_runs(seed: int, mean_by_config: dict, repeat: int = 5, noise: float = 0.02, tag: str = ""):
    """Elapsed times drawn from a normal distribution with ``noise`` relative stdev, per (topology, ranks)."""
    rng = random.Random(seed)
    out = []
    for (topology, ranks), mean in mean_by_config.items():
        for run in craft.halo(topology, ranks, [mean * rng.gauss(1, noise) for _ in range(repeat)]):
            run["run_id"] += tag
            out.append(run)
    return out


BASE = {("native", 2): 10.0, ("native", 4): 5.5, ("2vm-2vswitch", 4): 6.2}


def test_thirty_percent_regression_is_flagged():
    slower = {**BASE, ("native", 2): 13.0}
    result = compare.compare(halo_runs(1, BASE), halo_runs(2, slower, tag="b"), threshold_pct=5)
    flagged = {(c.key[1], c.key[2], c.metric.name) for c in result.regressions}
    assert flagged == {("native", 2, "elapsed_s"), ("native", 2, "step_s.median")}
    (change,) = [c for c in result.regressions if c.metric.name == "elapsed_s"]
    assert change.change_pct == pytest.approx(30, abs=4)
    assert change.test.p_value < 1e-4 and change.noise_floor_pct < 5
    assert result.regressed


@pytest.mark.parametrize("seed", range(20))
def test_rerun_from_the_same_distribution_is_not_flagged(seed):
    result = compare.compare(halo_runs(seed, BASE), halo_runs(seed + 1000, BASE, tag="b"), threshold_pct=5)
    assert not result.regressed
    assert {c.verdict for c in result.changes} <= {"not significant", "within threshold", "within noise"}


def test_improvement_is_reported_not_failed():
    faster = {**BASE, ("native", 4): 4.0}
    result = compare.compare(halo_runs(3, BASE), halo_runs(4, faster, tag="b"))
    assert not result.regressed
    assert {c.key[2] for c in result.changes if c.verdict == "improvement"} == {4}


def test_bandwidth_drop_is_a_regression():
    before = [r for t in [10000, 10100, 9900] for r in craft.stream("native", 2, [t])]
    after = [r for t in [7000, 7100, 6900] for r in craft.stream("native", 2, [t])]
    for i, r in enumerate(after):
        r["run_id"] += f"-after{i}"
    result = compare.compare(before, after)
    assert {c.metric.name for c in result.regressions} == {f"bandwidth_mbps.{op}" for op in
                                                           ("copy", "scale", "add", "triad")}
    assert all(c.worse_pct == pytest.approx(30, abs=0.5) for c in result.regressions)


def test_significant_but_small_or_noisy_changes_are_not_regressions():
    assert compare.verdict(4.0, welch([1, 1.01, 0.99], [2, 2.01, 1.99]), 5, 1, 0.05) == "within threshold"
    assert compare.verdict(8.0, welch([1, 1.01, 0.99], [2, 2.01, 1.99]), 5, 12, 0.05) == "within noise"
    assert compare.verdict(8.0, welch([1, 2, 3], [2, 3, 4]), 5, 1, 0.05) == "not significant"
    assert compare.verdict(40.0, welch([1], [2]), 5, 0, 0.05) == "untested"


def test_single_repetitions_are_reported_untested():
    after = craft.halo("native", 2, [20.0])
    after[0]["run_id"] = "after"
    result = compare.compare(craft.halo("native", 2, [10.0]), after)
    assert not result.regressed
    assert {c.verdict for c in result.changes} == {"untested"}
    assert any("fewer than 2 repetitions" in line for line in compare.summary_lines(result))


def test_configuration_that_now_fails_is_a_regression():
    before = craft.halo("native", 2, [1.0, 1.1])
    after = [craft.record("halo", "native", 2, 0, {}, status="timeout", run_id="t")]
    result = compare.compare(before, after)
    assert result.regressed and not result.changes
    assert "BROKEN" in "\n".join(compare.summary_lines(result))


def test_unmatched_configurations_are_listed():
    result = compare.compare(craft.halo("native", 2, [1.0, 1.0]), craft.halo("native", 4, [1.0, 1.0]))
    assert len(result.only_baseline) == 1 and len(result.only_current) == 1 and not result.regressed


def write_pair(tmp_path, current_means, name="cur"):
    base, cur = tmp_path / "base.jsonl", tmp_path / f"{name}.jsonl"
    craft.write(base, halo_runs(11, BASE))
    craft.write(cur, halo_runs(12, current_means, tag="c"))
    return base, cur


def test_cli_exit_codes_and_markdown(tmp_path):
    base, cur = write_pair(tmp_path, {**BASE, ("2vm-2vswitch", 4): 6.2 * 1.3})
    proc = vnetbench("compare", base, cur, "--format", "markdown", check=1)
    assert proc.stdout.startswith("### vnetbench compare: **regressed**")
    assert "| halo x4 on 2vm-2vswitch, bind core" in proc.stdout and "| regression |" in proc.stdout
    _, same = write_pair(tmp_path, BASE, "same")
    vnetbench("compare", base, same, check=0)
    data = json.loads(vnetbench("compare", base, cur, "--format", "json", check=1).stdout)
    assert data["regressed"] is True and data["counts"]["regression"] == 2
    change = [c for c in data["changes"] if c["verdict"] == "regression"][0]
    assert {"change_pct", "worse_pct", "p_value", "noise_floor_pct", "significant", "baseline", "current"} <= set(change)


def test_cli_threshold_above_the_change_passes(tmp_path):
    base, cur = write_pair(tmp_path, {**BASE, ("native", 2): 11.5})  # +15%
    vnetbench("compare", base, cur, "--threshold", "5%", check=1)
    vnetbench("compare", base, cur, "--threshold", "25%", check=0)


@pytest.mark.parametrize("args, message", [
    (["--threshold", "five"], "argument --threshold: 'five' is not a percentage"),
    (["--alpha", "2"], "argument --alpha: 2 is out of range"),
])
def test_cli_bad_options(tmp_path, args, message):
    base, cur = write_pair(tmp_path, BASE)
    proc = vnetbench("compare", base, cur, *args, check=2)
    assert message in proc.stderr


def test_cli_refuses_newer_schema_and_missing_store(tmp_path):
    base, _ = write_pair(tmp_path, BASE)
    proc = vnetbench("compare", base, STORES / "newer-schema.jsonl", check=2)
    assert "CURRENT:" in proc.stderr and "schema version 99" in proc.stderr
    proc = vnetbench("compare", tmp_path / "missing.jsonl", base, check=2)
    assert "BASELINE:" in proc.stderr and "does not exist" in proc.stderr
