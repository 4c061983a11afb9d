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
