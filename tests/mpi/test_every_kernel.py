"""Every registered kernel, run for real at 2 ranks with its own SMOKE options: each metric it declares
is in its record as a number, and report (every format, per-size tables) and compare handle it.

A kernel added to the registry later is picked up here without edits.
"""

import json

import pytest

from conftest import json_lines, requires_mpi, vnetbench
from vnetbench import kernels
from vnetbench.analysis import metrics

pytestmark = [requires_mpi, pytest.mark.timeout(120)]

FORMATS = ("table", "markdown", "csv", "json")


@pytest.fixture(scope="module", params=kernels.names())
def ran(request, tmp_path_factory):
    """(kernel module, store, records) of two repetitions of the kernel at 2 ranks."""
    name = request.param
    kernel = kernels.get(name)
    assert isinstance(getattr(kernel, "SMOKE", None), list), f"{name} declares no SMOKE options"
    store = tmp_path_factory.mktemp(name) / "results.jsonl"
    proc = vnetbench("run", name, "--ranks", 2, "--repeat", 2, "--json", "--store", store, *kernel.SMOKE,
                     timeout=100)
    records = json_lines(proc.stdout)
    assert proc.returncode == 0 and len(records) == 2, proc.stderr[-3000:]
    return kernel, store, records


def test_every_declared_metric_is_a_number_in_the_record(ran):
    kernel, _, records = ran
    for record in records:
        assert record["status"] == "ok", record["validation"]
        declared = kernel.metrics(record["metrics"])
        assert declared, "the kernel declares no metric for its own record"
        missing = [f"{metric.name}={raw!r}" for metric, raw in declared if metrics.finite(raw) is None]
        assert not missing, f"declared but not numbers: {missing}"
        names = [metric.name for metric, _ in declared]
        assert len(set(names)) == len(names), "metric names repeat"
        assert kernel.table(names), "no table metric among the declared ones"
        assert set(kernel.table(names)) <= set(names)
        headline = kernel.headline(record["metrics"])
        assert headline and all(metrics.finite(value) is not None for _, value in headline), headline


def test_report_shows_it_in_every_format(ran):
    kernel, store, records = ran
    name = records[0]["kernel"]
    table_metric = kernel.table([metric.name for metric, _ in kernel.metrics(records[0]["metrics"])])[0]
    for form in FORMATS:
        study = vnetbench("report", "--store", store, "--format", form, check=0)
        assert "warning" not in study.stderr, study.stderr
        assert table_metric in study.stdout or form in ("table", "markdown"), (form, study.stdout[:500])
        runs = vnetbench("report", "--store", store, "--runs", "--format", form, check=0)
        assert name in runs.stdout
    data = json.loads(vnetbench("report", "--store", store, "--format", "json", check=0).stdout)
    (first, *_) = data["tables"]
    assert (first["kernel"], first["metric"]["name"]) == (name, table_metric)
    (row,) = first["rows"]
    assert row["topology"] == "native" and row["cells"][0]["n"] == 2 and row["cells"][0]["median"] > 0
    if hasattr(kernel, "size_rows"):
        sizes = vnetbench("report", "--store", store, "--sizes", records[0]["run_id"], "--format", "csv", check=0)
        lines = sizes.stdout.splitlines()
        assert lines[0].startswith("run_id,repetition,size (B)")
        assert len(lines) == 1 + len(records[0]["metrics"]["sizes"])  # one record: run ids are per repetition


def test_compare_matches_every_declared_metric(ran):
    kernel, store, records = ran
    proc = vnetbench("compare", store, store, "--format", "json", "--all", check=0)
    data = json.loads(proc.stdout)
    declared = {metric.name for metric, _ in kernel.metrics(records[0]["metrics"])}
    assert {change["metric"] for change in data["changes"]} == declared
    assert not data["regressed"] and data["counts"]["regression"] == 0
    for form in ("table", "markdown"):
        assert "0 regression(s)" in vnetbench("compare", store, store, "--format", form, check=0).stdout
