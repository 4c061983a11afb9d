"""Reading stores for report and compare: damaged, foreign and malformed content never crashes them."""

import json
import sys
import warnings
from pathlib import Path

import pytest

from conftest import vnetbench
from vnetbench.core import records
from vnetbench.analysis import compare, metrics, report, tables as study
from vnetbench.analysis import records as loading
from vnetbench.core.errors import UsageError
from vnetbench.core.store import Store, StoreWarning

STORES = Path(__file__).resolve().parent.parent / "data" / "stores"
sys.path.insert(0, str(STORES))
import craft  # noqa: E402


def test_damaged_store_keeps_sound_records_and_names_bad_lines():
    loaded = loading.load(STORES / "damaged.jsonl")
    assert len(loaded.records) == 6
    assert [(s.line, s.reason.split(" (")[0].split(":")[0]) for s in loaded.skipped] == [
        (2, "not JSON"), (4, "not a vnetbench record"), (9, "truncated last line")]
    text = "\n".join(loaded.warnings())
    assert "damaged.jsonl:2: skipped" in text and "damaged.jsonl:9: skipped: truncated last line" in text


def test_store_read_warns_for_each_bad_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(Store(STORES / "damaged.jsonl").read()) == 6
    assert [str(w.message).split(": skipped")[0].rsplit(":", 1)[1] for w in caught
            if issubclass(w.category, StoreWarning)] == ["2", "4", "9"]


def test_report_and_compare_survive_damaged_stores(tmp_path):
    proc = vnetbench("report", "--store", STORES / "damaged.jsonl", check=0)
    assert "native" in proc.stdout
    for line in (2, 4, 9):
        assert f"damaged.jsonl:{line}: skipped" in proc.stderr
    proc = vnetbench("compare", STORES / "damaged.jsonl", STORES / "damaged.jsonl", check=0)
    assert "0 regression(s)" in proc.stdout


def test_truncated_line_then_more_appends_stays_readable(tmp_path):
    store = tmp_path / "s.jsonl"
    good = craft.halo("native", 2, [1.0, 2.0])
    store.write_bytes(json.dumps(good[0]).encode() + b"\n" + json.dumps(good[1]).encode()[:40])
    Store(store).append(craft.halo("native", 2, [3.0])[0] | {"run_id": "after"})
    loaded = loading.load(store)
    assert [r["run_id"] for r in loaded.records] == [good[0]["run_id"], "after"]
    assert [s.line for s in loaded.skipped] == [2]


def malformed_records():
    base = craft.halo("native", 2, [1.0])[0]
    yield base | {"metrics": {"elapsed_s": "fast"}}
    yield base | {"metrics": {"elapsed_s": True, "step_s": [1, 2]}}
    yield base | {"metrics": {"elapsed_s": float("nan")}}
    yield base | {"kernel": "pingpong", "metrics": {"sizes": "all of them"}}
    yield base | {"kernel": "pingpong", "metrics": {"sizes": [{"bytes": "x"}, 7, {"bytes": 8, "latency_us": None}]}}
    yield base | {"kernel": "allreduce", "metrics": {"sizes": None}}
    yield base | {"kernel": "stream", "metrics": {"bandwidth_mbps": [1, 2]}}
    yield base | {"kernel": "someday", "metrics": {"score": 3, "name": "x", "nested": {"a": 1}}}
    yield base | {"topology": {"name": 42}}
    yield base | {"params": {"odd": [1, {"b": None}]}, "launch": "not a dict", "run_options": [1]}


@pytest.mark.parametrize("record", list(malformed_records()))
def test_malformed_metrics_yield_fewer_numbers_never_errors(record, tmp_path):
    assert records.check_record(record) == []  # sound at the record level, odd inside
    metrics.values(record)
    tables = study.build([record])
    for fmt in ("table", "markdown", "csv", "json"):
        report.render_study(tables, fmt, baseline="native")
    compare.render_comparison(compare.compare([record], [record]), "markdown")
    store = tmp_path / "odd.jsonl"
    craft.write(store, [record])
    vnetbench("report", "--store", store, "--plot", tmp_path / "p.png", "--html", tmp_path / "p.html", check=0)


def test_unknown_kernel_numbers_are_kept_without_a_direction():
    record = craft.record("someday", "native", 2, 0, {"score": 3.5, "label": "x"})
    (metric, value), = metrics.extract(record)
    assert (metric.name, value, metric.better) == ("score", 3.5, None)


def test_newer_schema_is_refused_with_the_option_named():
    with pytest.raises(UsageError, match=r"BASELINE: .*schema version 99 \(line 2\).*up to 1.*upgrade vnetbench"):
        loading.load(STORES / "newer-schema.jsonl", "BASELINE")


def test_older_schema_is_migrated(tmp_path, monkeypatch):
    # pretend this vnetbench writes schema 2, where elapsed time moved to metrics.elapsed_s
    def to_v2(record):
        record["metrics"] = {"elapsed_s": record["metrics"].pop("elapsed")}
        return record

    monkeypatch.setattr(records, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(loading.MIGRATIONS, 1, to_v2)
    store = tmp_path / "old.jsonl"
    craft.write(store, [craft.record("halo", "native", 2, 0, {"elapsed": 4.0})])
    loaded = loading.load(store)
    assert loaded.migrated == 1 and loaded.records[0]["schema_version"] == 2
    assert loaded.records[0]["metrics"] == {"elapsed_s": 4.0}
    assert "migrated to schema version 2" in loaded.warnings()[0]


def test_older_schema_without_migration_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "SCHEMA_VERSION", 3)
    store = tmp_path / "old.jsonl"
    craft.write(store, [craft.record("halo", "native", 2, 0, {"elapsed_s": 4.0})])
    with pytest.raises(UsageError, match="CURRENT: .*schema version 1, which this vnetbench .* cannot migrate"):
        loading.load(store, "CURRENT")


def test_duplicate_records_count_once(tmp_path):
    store = tmp_path / "dup.jsonl"
    (one,) = craft.halo("native", 2, [1.0])
    craft.write(store, [one, one])
    loaded = loading.load(store)
    assert len(loaded.records) == 1 and loaded.duplicates == 1


def test_config_key_parts():
    (one,) = craft.halo("native", 4, [1.0], params={"steps": 3}, bind="none")
    one["run_options"] = {"mem_policy": "interleave"}
    assert loading.config_key(one) == ("halo", "native", 4, '{"steps":3}', "none", '{"mem_policy":"interleave"}')
    assert loading.describe_key(loading.config_key(one)) == 'halo x4 on native, bind none, {"mem_policy":"interleave"}'
