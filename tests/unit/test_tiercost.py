"""The suite's own accounting (tests/harness/tiercost.py): each lane's pytest notes when a tier begins, and the
lanes' CPU samples are split between those tiers."""

import time

from harness import tiercost


def test_a_lane_notes_each_tier_once_when_it_begins_and_the_end(tmp_path, monkeypatch):
    timeline = tmp_path / "tiers.log"
    monkeypatch.setenv(tiercost.TIMELINE, str(timeline))
    for tier in ("apps", "apps", "unit", "apps"):
        tiercost.begin(tier)
    tiercost.end()
    lines = timeline.read_text().splitlines()
    assert [line.split()[1] for line in lines] == ["apps", "unit", "apps", "-"]
    stamps = [float(line.split()[0]) for line in lines]
    assert stamps == sorted(stamps) and abs(stamps[-1] - time.time()) < 60
    assert [tier for tier, _, _ in tiercost.windows(lines)] == ["apps", "unit", "apps"]


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(tiercost.TIMELINE, raising=False)
    monkeypatch.chdir(tmp_path)
    tiercost.begin("apps")
    tiercost.end()
    assert list(tmp_path.iterdir()) == []


def test_a_tier_a_killed_session_did_not_end_is_left_out():
    assert tiercost.windows(["10.0 apps", "15.5 unit"]) == [("apps", 10.0, 15.5)]
    assert tiercost.windows(["10.0 apps", "15.5 -"]) == [("apps", 10.0, 15.5)]
    assert tiercost.windows(["10.0 apps", "15.5 unit", "17.", ""]) == [("apps", 10.0, 15.5)]


def test_each_tier_gets_its_lane_s_cpu_between_the_samples_around_it():
    # the here lane uses 1.5 CPUs throughout; the sandbox lane 0.5 until t=104, then nothing; the machine 2
    samples = [(100.0 + t, {"here": 1.5 * t, "sandbox": 0.5 * min(t, 4)}, 2.0 * t, 0.0) for t in range(11)]
    assert tiercost.at(samples, 102.5, "here") == 3.75 and tiercost.at(samples, 102.5, None) == 5.0
    text = tiercost.table(samples, {"here": ["100.0 apps", "104.0 unit", "110.0 -"],
                                    "sandbox": ["101.0 guest", "104.0 -"]}, metered=True)
    rows = [line.split() for line in text.splitlines()[1:]]
    assert ["here", "apps", "4", "s", "6", "CPU-s"] in rows
    assert ["here", "unit", "6", "s", "9", "CPU-s"] in rows
    assert ["here", "(all)", "10", "s", "15", "CPU-s"] in rows
    assert ["sandbox", "guest", "3", "s", "2", "CPU-s"] in rows  # 1.5 rounded half to even
    assert text.splitlines()[-1].startswith("  machine: 20 CPU-s busy and 0 idle over 10 s (100% busy")


def test_a_lane_without_cpuacct_gets_wall_times_alone():
    samples = [(100.0 + t, {}, 1.0 * t, 1.0 * t) for t in range(5)]
    text = tiercost.table(samples, {"here": ["100.0 apps", "103.0 -"]}, metered=False)
    assert "no cpuacct" in text.splitlines()[0]
    assert text.splitlines()[1].split() == ["here", "apps", "3", "s"]
    assert "(50% busy" in text.splitlines()[-1]


def test_each_test_s_cost_is_its_lane_s_usage_between_its_start_and_end(tmp_path, monkeypatch):
    costs, usage = tmp_path / "costs.log", tmp_path / "cpuacct.usage"
    monkeypatch.setenv(tiercost.COSTS, str(costs))
    tests = tiercost.Tests()
    tests.usage_file = usage  # a lane's group's file, as cpuacct keeps it: nanoseconds
    usage.write_text("5000000000\n")
    tests.began()
    usage.write_text("7250000000\n")
    tests.ended("tests/apps/test_x.py::test_one[a b]")
    tests.usage_file = tmp_path / "gone"  # a group that cannot be read: the wall time alone
    tests.began()
    tests.ended("tests/unit/test_y.py::test_two")
    first, second = [line.split(" ", 2) for line in costs.read_text().splitlines()]
    assert first[0] == "2.25" and float(first[1]) < 60 and first[2] == "tests/apps/test_x.py::test_one[a b]"
    assert second[0] == "-" and second[2] == "tests/unit/test_y.py::test_two"


def test_without_the_costs_variable_no_test_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(tiercost.COSTS, raising=False)
    monkeypatch.chdir(tmp_path)
    tests = tiercost.Tests()
    tests.began()
    tests.ended("tests/unit/test_y.py::test_two")
    assert tests.usage_file is None and list(tmp_path.iterdir()) == []


def test_the_dearest_tests_of_both_lanes_come_first():
    text = tiercost.dearest({"here": ["1.50 2.00 tests/mpi/a.py::t1", "9.25 4.00 tests/mpi/a.py::t2[x y]", "3."],
                             "sandbox": ["4.00 30.00 tests/guest/b.py::t3", "- 1.00 tests/guest/b.py::t4"]}, count=2)
    lines = text.splitlines()
    assert lines[0].startswith("tests: the 2 dearest of 3 tests")
    assert [line.split() for line in lines[1:]] == [["here", "9.2", "CPU-s", "4.0", "s", "tests/mpi/a.py::t2[x", "y]"],
                                                    ["sandbox", "4.0", "CPU-s", "30.0", "s", "tests/guest/b.py::t3"]]
    assert tiercost.dearest({"here": ["- 1.00 tests/unit/c.py::t5"]}) == ""


def test_a_lane_s_own_group_is_found_where_cpuacct_is_a_hierarchy_of_its_own():
    path = tiercost.own_usage_file()
    if tiercost._cpuacct() is None:
        assert path is None
    else:
        assert path.name == "cpuacct.usage" and tiercost.usage(path) > 0
