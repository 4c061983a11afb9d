"""vnetbench report: the study's tables from crafted stores, checked against numbers computed by hand.

tests/data/stores/study.jsonl (made by craft.py beside it) holds, for halo (steps=20):
  native        x2: 10, 12, 11      x4: 6, 6, 6 and one timeout
  2vm-2vswitch  x2: 11, 13.2, 12.1  x4: 6, 9, 7.5
so: medians 11, 6, 12.1, 7.5; overhead of 2vm-2vswitch +10% at 2 ranks, +25% at 4;
speedup 2->4 native 11/6 = 1.8333 (efficiency 0.9167), 2vm-2vswitch 12.1/7.5 = 1.6133 (0.8067);
CV native x2 = 1/11 = 9.09%, 2vm-2vswitch x4 = 1.5/7.5 = 20% (marked noisy).
stream triad: native x1 6000, x2 12000 (speedup 2.0, efficiency 1.0); 2vm-1vswitch x2 13100 (overhead -9.17%).
"""

import base64
import csv
import io
import json
import sys
from pathlib import Path

import pytest

from conftest import vnetbench
from vnetbench.analysis import records as loading, report, tables as study

STORES = Path(__file__).resolve().parent.parent / "data" / "stores"
STUDY = STORES / "study.jsonl"


@pytest.fixture(scope="module")
def tables():
    return study.build(loading.load(STUDY).records, "native")


def table_of(tables, kernel, metric, **params):
    found = [t for t in tables if t.kernel == kernel and t.metric.name == metric
             and all(t.params.get(k) == v for k, v in params.items())]
    assert len(found) == 1, [(t.kernel, t.metric.name, t.params) for t in tables]
    return found[0]


def row(table, topology):
    (found,) = [r for r in table.rows if r.topology == topology]
    return found


def test_halo_cells_overhead_scaling_and_noise(tables):
    halo = table_of(tables, "halo", "elapsed_s", steps=20)
    assert halo.rank_counts == [2, 4]
    assert [r.topology for r in halo.rows] == ["native", "2vm-2vswitch"]  # baseline first
    native, vms = row(halo, "native"), row(halo, "2vm-2vswitch")
    assert native.cells[2].summary.median == 11.0 and native.cells[4].summary.median == 6.0
    assert native.cells[4].summary.n == 3 and native.cells[4].failed == {"timeout": 1}
    assert vms.cells[2].summary.median == pytest.approx(12.1)
    assert vms.cells[4].summary.median == 7.5
    assert native.cells[2].overhead_pct == 0.0
    assert vms.cells[2].overhead_pct == pytest.approx(10.0)
    assert vms.cells[4].overhead_pct == pytest.approx(25.0)
    (step,) = native.scaling
    assert (step.from_ranks, step.to_ranks) == (2, 4)
    assert step.speedup == pytest.approx(11 / 6) and step.efficiency == pytest.approx(11 / 12)
    assert vms.scaling[0].speedup == pytest.approx(12.1 / 7.5)
    assert vms.scaling[0].efficiency == pytest.approx(12.1 / 15)
    assert native.cells[2].summary.cv == pytest.approx(1 / 11)
    assert vms.cells[4].summary.cv == pytest.approx(0.2) and vms.cells[4].summary.noisy
    assert not native.cells[2].summary.noisy


def test_other_parameters_get_their_own_table(tables):
    other = table_of(tables, "halo", "elapsed_s", steps=80)
    assert other.rank_counts == [2]
    assert row(other, "native").cells[2].summary.median == 42.0
    assert "steps=80" in other.params_label and "steps=20" in table_of(tables, "halo", "elapsed_s", steps=20).params_label


def test_stream_bandwidth_overhead_is_loss_and_scaling_is_gain(tables):
    triad = table_of(tables, "stream", "bandwidth_mbps.triad")
    native, vms = row(triad, "native"), row(triad, "2vm-1vswitch")
    assert native.cells[1].summary.median == 6000.0 and native.cells[2].summary.median == 12000.0
    assert native.scaling[0].speedup == pytest.approx(2.0) and native.scaling[0].efficiency == pytest.approx(1.0)
    assert vms.cells[2].overhead_pct == pytest.approx((12000 - 13100) / 12000 * 100)  # faster: negative
    assert 1 not in vms.cells and vms.scaling == []
    ops = [t.metric.name for t in tables if t.kernel == "stream"]
    assert ops == ["bandwidth_mbps.triad", "bandwidth_mbps.copy", "bandwidth_mbps.scale", "bandwidth_mbps.add"]


def test_pingpong_small_latency_and_large_bandwidth(tables):
    latency = table_of(tables, "pingpong", "latency_us@1B")
    bandwidth = table_of(tables, "pingpong", "bandwidth_mbps@1048576B")
    assert row(latency, "native").cells[2].summary.median == pytest.approx(1.1)
    assert row(latency, "2vm-2vswitch").cells[2].overhead_pct == pytest.approx((30 - 1.1) / 1.1 * 100)
    assert row(bandwidth, "2vm-2vswitch").cells[2].overhead_pct == pytest.approx((9500 - 110) / 9500 * 100)
    assert not latency.metric.scaling and row(latency, "native").scaling == []


def test_missing_baseline_gives_no_overhead():
    tables = study.build(loading.load(STUDY).records, "1vm")
    halo = [t for t in tables if t.kernel == "halo"][0]
    assert halo.baseline is None
    assert all(cell.overhead_pct is None for r in halo.rows for cell in r.cells.values())
    assert "no runs on the baseline topology '1vm'" in report.render_study(tables, "table", baseline="1vm")


def test_json_names_every_derived_number(tables):
    data = json.loads(report.render_study(tables, "json", baseline="native"))
    halo = [t for t in data["tables"] if t["kernel"] == "halo" and t["params"]["steps"] == 20][0]
    assert halo["metric"] == {"name": "elapsed_s", "label": "elapsed", "unit": "s", "better": "lower"}
    vms = [r for r in halo["rows"] if r["topology"] == "2vm-2vswitch"][0]
    cell4 = [c for c in vms["cells"] if c["ranks"] == 4][0]
    assert cell4["median"] == 7.5 and cell4["overhead_pct"] == pytest.approx(25.0)
    assert cell4["cv_pct"] == pytest.approx(20.0) and cell4["noisy"] is True
    assert cell4["values"] == [6.0, 9.0, 7.5] and cell4["n"] == 3
    assert vms["scaling"][0]["speedup"] == pytest.approx(12.1 / 7.5)
    assert vms["scaling"][0]["efficiency_pct"] == pytest.approx(12.1 / 15 * 100)
    assert vms["scaling"][0]["ideal_speedup"] == 2.0
    assert "overhead" in data["legend"]


def test_table_markdown_and_csv_agree(tables):
    text = report.render_study(tables, "table", baseline="native")
    assert "12.1 +-9.1% x3" in text and "+25.0%" in text and "20.0%*" in text and "1.61x (81%)" in text
    assert "6 +-0.0% x3 [1 failed]" in text
    md = report.render_study(tables, "markdown", baseline="native")
    # the overhead and the scaling step computed from the noisy cell carry its mark
    assert "| 2vm-2vswitch | 12.1 +-9.1% x3 | 7.5 +-20.0% x3 * | +10.0% | +25.0% * |" in md
    assert "1.61x (81%) *" in md
    assert "overhead of 2vm-2vswitch x4 computed from a noisy cell: 2vm-2vswitch x4 (cv 20%)" in md
    rows = list(csv.DictReader(io.StringIO(report.render_study(tables, "csv"))))
    (cell,) = [r for r in rows if r["kernel"] == "halo" and r["topology"] == "2vm-2vswitch" and r["ranks"] == "4"
               and "steps=20" in r["params"]]
    assert float(cell["median"]) == 7.5 and float(cell["overhead_pct"]) == pytest.approx(25.0)
    assert float(cell["speedup"]) == pytest.approx(12.1 / 7.5) and cell["scaling_from_ranks"] == "2"
    assert cell["noisy"] == "True" and cell["overhead_from_noisy"] == "2vm-2vswitch x4 (cv 20%)"


def _loaded(records: list[dict], shares: list[float | None]) -> list[dict]:
    for record, share in zip(records, shares):
        record.setdefault("launch", {})["host_load"] = {} if share is None else \
            {"foreign_share": share, "foreign_cpu_s": share * 2, "wall_s": 1.0, "cpus": 2, "own_cpu_s": 1.0}
    return records


def test_a_cell_measured_beside_other_work_is_marked_and_so_is_all_computed_from_it():
    sys.path.insert(0, str(STORES))
    import craft

    # steady values (cv ~1%): only the host load can mark them
    records = _loaded(craft.halo("native", 2, [1.00, 1.01, 1.00]), [0.01, 0.31, None]) \
        + _loaded(craft.halo("2vm-1vswitch", 2, [1.10, 1.11, 1.10]), [0.0, 0.02, 0.049]) \
        + _loaded(craft.halo("2vm-1vswitch", 4, [0.60, 0.61, 0.60]), [0.0, 0.0, 0.0])
    (table,) = study.build(records)
    native, vms = table.rows
    assert native.cells[2].loaded == "other work used 31% of the cpus during 1 of 3 run(s)"
    assert native.cells[2].noise == native.cells[2].loaded and not native.cells[2].summary.noisy
    assert vms.cells[2].loaded is None and vms.cells[2].noise is None  # 4.9% is under the threshold
    assert vms.cells[2].overhead_pct == pytest.approx(10.0)
    assert vms.cells[2].derived_from == "native x2 (other work used 31% of the cpus during 1 of 3 run(s))"
    assert vms.scaling[0].derived_from is None  # both of its cells are quiet
    text = report.render_study([table], "table", baseline="native")
    assert "1 +-0.5% x3 *" in text and "+10.0% *" in text
    assert "under load: native x2: other work used 31% of the cpus during 1 of 3 run(s)" in text
    # no mark where nothing was loaded: the same runs measured quietly
    quiet = study.build(_loaded(craft.halo("native", 2, [1.00, 1.01, 1.00]), [0.01, 0.0, 0.0])
                        + _loaded(craft.halo("2vm-1vswitch", 2, [1.10, 1.11, 1.10]), [0.0, 0.0, 0.0]))
    assert "*" not in report.study_grid(quiet[0])[1][1][2]


def test_rows_split_by_binding_only_when_one_count_ran_both():
    sys.path.insert(0, str(STORES))
    import craft

    records = craft.halo("native", 2, [1.0, 1.2], bind="core") + craft.halo("native", 2, [2.0], bind="none") \
        + craft.halo("native", 4, [0.7], bind="none")
    (table,) = study.build(records)
    assert [r.label for r in table.rows] == ["native [bind core]", "native [bind none]"]
    plain = study.build(craft.halo("native", 2, [1.0], bind="core") + craft.halo("native", 4, [0.6], bind="none"))
    assert [r.label for r in plain[0].rows] == ["native"]


def test_run_records_rendering_still_works():
    records = loading.load(STUDY).records[:3]
    assert "elapsed s" in report.render_records(records, "table")
    assert report.render_records(records, "markdown").startswith("| kernel | topology |")


def test_report_command_formats_plot_and_html(tmp_path):
    proc = vnetbench("report", "--store", STUDY, "--format", "json", "--plot", tmp_path / "p.png",
                     "--html", tmp_path / "r.html", check=0)
    assert json.loads(proc.stdout)["tables"]
    png = (tmp_path / "p.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20000
    page = (tmp_path / "r.html").read_text()
    assert page.count("data:image/png;base64,") == 3  # halo, stream, pingpong
    assert "http://" not in page and "https://" not in page and "<script" not in page  # self-contained
    assert "2vm-2vswitch" in page and 'class="noisy"' in page
    embedded = page.split("data:image/png;base64,")[1].split('"')[0]
    assert base64.b64decode(embedded).startswith(b"\x89PNG")


def test_report_runs_lists_records():
    proc = vnetbench("report", "--store", STUDY, "--runs", "--format", "csv", check=0)
    assert len(proc.stdout.splitlines()) == 1 + 25


@pytest.mark.parametrize("args, message", [
    (["--plot", "out.txt"], "--plot: out.txt should end in"),
    (["--html", "/nonexistent/dir/r.html"], "--html: cannot write"),
    (["--format", "xml"], "argument --format"),
])
def test_report_bad_options(args, message):
    proc = vnetbench("report", "--store", STUDY, *args, check=2)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_report_missing_store_names_the_option(tmp_path):
    proc = vnetbench("report", "--store", tmp_path / "none.jsonl", check=2)
    assert "--store:" in proc.stderr and "does not exist" in proc.stderr


def test_configurations_that_never_passed_are_named(tmp_path):
    sys.path.insert(0, str(STORES))
    import craft

    runs = craft.halo("native", 2, [1.0]) + [craft.record("halo", "2vm-2vswitch", 2, 0, {}, status="timeout")]
    assert study.unmeasured(runs) == ["halo x2 on 2vm-2vswitch, bind core: 1 timeout"]
    assert study.unmeasured(loading.load(STUDY).records) == []  # one timeout beside three passes
    craft.write(tmp_path / "s.jsonl", runs)
    proc = vnetbench("report", "--store", tmp_path / "s.jsonl", check=0)
    assert "no passing run: halo x2 on 2vm-2vswitch, bind core: 1 timeout" in proc.stdout


def test_runs_of_different_mpi_libraries_are_never_one_cell(tmp_path):
    """Issue 22: a store holding Open MPI 4.1 and 5.0 runs of one configuration shows two tables, each
    naming its library; a store of one library names none (nothing to tell apart)."""
    lines = [json.loads(line) for line in STUDY.read_text().splitlines()]
    halo = [r for r in lines if r["kernel"] == "halo" and r["topology"]["name"] == "native" and r["ranks"] == 2]
    mixed = []
    for version, elapsed in (("Open MPI 4.1.4", 20.0), ("Open MPI 5.0.11", 10.0)):
        for record in halo:
            mixed.append({**record, "run_id": f"{record['run_id']}-{version[-6:]}", "environment": {
                "versions": {"mpi": version}}, "metrics": {**record["metrics"], "elapsed_s": elapsed}})
    store = tmp_path / "mixed.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in mixed))
    built = [t for t in study.build(loading.load(store).records, "native") if t.metric.name == "elapsed_s"]
    assert sorted({(t.mpi, t.rows[0].cells[2].summary.median) for t in built}) == [
        ("Open MPI 4.1.4", 20.0), ("Open MPI 5.0.11", 10.0)]
    shown = vnetbench("report", "--store", store, "--format", "markdown", check=0).stdout
    assert "MPI Open MPI 4.1.4" in shown and "MPI Open MPI 5.0.11" in shown, shown
    store.write_text("".join(json.dumps(r) + "\n" for r in mixed[:len(halo)]))
    assert "MPI Open MPI" not in vnetbench("report", "--store", store, "--format", "markdown", check=0).stdout
