"""Records and the store: schema checks, atomic appends, robust reading. No MPI."""

import json
import multiprocessing
import os

import pytest

from vnetbench.core.errors import StoreError, UsageError
from vnetbench.core.records import SCHEMA_VERSION, check_record, failure_record, make_record
from vnetbench.core.store import Store


def sample(**overrides):
    record = make_record(kernel="allreduce", params={"min_size": 8}, ranks=2,
                         metrics={"sizes": [{"bytes": 8, "avg_us": 3.0, "min_us": 2.0, "max_us": 4.0}]},
                         validation={"passed": True, "detail": "ok"},
                         placement=[{"rank": 0, "hostname": "a", "cpus": [0]}, {"rank": 1, "hostname": "a", "cpus": [1]}],
                         environment={"hostnames": ["a"]}, topology={"name": "native", "spec": None})
    record.update(overrides)
    return record


def test_made_record_is_sound_and_versioned():
    record = sample()
    assert check_record(record) == []
    assert record["schema_version"] == SCHEMA_VERSION
    assert record["status"] == "ok"


def test_failed_validation_makes_an_invalid_record():
    record = make_record(kernel="halo", params={}, ranks=1, metrics={}, validation={"passed": False, "detail": "x"},
                         placement=[{"rank": 0}], environment={})
    assert record["status"] == "invalid"


@pytest.mark.parametrize("change, phrase", [
    ({"status": "weird"}, "status: 'weird' is not one of"),
    ({"ranks": 0}, "ranks: must be >= 1"),
    ({"ranks": "2"}, "ranks: expected int"),
    ({"schema_version": SCHEMA_VERSION + 1}, "is newer than this vnetbench reads"),
    ({"placement": [{"rank": 0}]}, "placement: 1 entries for 2 ranks"),
    ({"validation": {"passed": "yes"}}, "validation.passed"),
])
def test_check_record_names_the_field(change, phrase):
    problems = check_record(sample(**change))
    assert any(phrase in p for p in problems), problems


def test_missing_field_is_named():
    record = sample()
    del record["environment"]
    assert check_record(record) == ["environment: missing"]


def test_failure_record_is_storable(tmp_path):
    record = failure_record(kernel="halo", params={}, ranks=4, status="timeout", detail="killed")
    Store(tmp_path / "s.jsonl").append(record)
    assert Store(tmp_path / "s.jsonl").read()[0]["status"] == "timeout"


def test_append_then_read_round_trips(tmp_path):
    store = Store(tmp_path / "deep" / "dir" / "results.jsonl")
    store.append(sample(repetition=0))
    store.append(sample(repetition=1))
    assert [r["repetition"] for r in store.read()] == [0, 1]


def test_append_refuses_malformed_record(tmp_path):
    store = Store(tmp_path / "s.jsonl")
    with pytest.raises(StoreError, match="malformed"):
        store.append({"kernel": "x"})
    assert not store.path.exists()


def test_truncated_last_line_is_skipped_with_warning_and_next_append_stays_whole(tmp_path):
    store = Store(tmp_path / "s.jsonl")
    store.append(sample(repetition=0))
    with open(store.path, "a") as handle:
        handle.write(json.dumps(sample(repetition=1))[:50])  # a writer killed mid-line
    with pytest.warns(UserWarning, match=r"s.jsonl:2: skipped: truncated last line"):
        assert len(store.read()) == 1
    store.append(sample(repetition=2))
    records, bad = store.scan()
    assert [r["repetition"] for r in records] == [0, 2]
    assert [b.line for b in bad] == [2]


def test_corrupted_and_foreign_lines_are_reported_by_number(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(sample()) + "\n" + "garbage{\n" + json.dumps({"hello": 1}) + "\n"
                    + json.dumps(sample(repetition=3)) + "\n")
    records, bad = Store(path).scan()
    assert len(records) == 2
    assert [(b.line, b.reason.split(" ")[0]) for b in bad] == [(2, "not"), (3, "not")]
    assert "not a vnetbench record" in bad[1].reason


def _append_many(path, worker, count):
    store = Store(path)
    for i in range(count):
        store.append(sample(run_id=f"w{worker}-{i}", params={"pad": "x" * 5000}))


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "s.jsonl"
    workers = [multiprocessing.Process(target=_append_many, args=(path, w, 40)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    records, bad = Store(path).scan()
    assert bad == []
    assert len(records) == 160
    assert len({r["run_id"] for r in records}) == 160


def test_check_writable_names_store_and_creates_nothing(tmp_path):
    with pytest.raises(UsageError, match="--store: .* is a directory"):
        Store(tmp_path).check_writable()
    target = tmp_path / "new" / "sub" / "s.jsonl"
    Store(target).check_writable()
    assert not (tmp_path / "new").exists()
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(UsageError, match="--store: cannot create"):
            Store(locked / "s.jsonl").check_writable()


def test_scan_of_missing_store_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="--store: .* does not exist"):
        Store(tmp_path / "nope.jsonl").scan()
