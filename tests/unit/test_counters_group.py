"""Counters read as perf event groups with time enabled/running, scaled as perf stat scales them."""

from pathlib import Path

import pytest

from vnetbench.kernels.counters import EVENTS, Counters, scale

HAS_PMU = Path("/sys/bus/event_source/devices/cpu").exists()


def busy(seconds: float) -> None:
    import time
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_software_group_is_counted_whole_and_grows_with_work():
    probes = Counters()
    assert probes.groups, probes.unavailable
    probes.start()
    busy(0.05)
    probes.stop()
    short = probes.result()
    probes = Counters()
    probes.start()
    busy(0.25)
    probes.stop()
    long = probes.result()
    for result in (short, long):
        assert set(result["events"]) | set(result["unavailable"]) == set(EVENTS)
        for name, value in result["events"].items():
            # software events are never multiplexed: counted the whole time, scaled == raw
            assert result["ratio"][name] == 1.0 and value == result["raw"][name]
    # task-clock is CPU time in ns: the busy loop's 50 and 250 ms, with room for a loaded machine
    assert 0.04e9 < short["events"]["task_clock_ns"] < 0.2e9
    assert long["events"]["task_clock_ns"] > 3 * short["events"]["task_clock_ns"]


def test_scaling_is_perf_stats():
    # perf stat: count * time_enabled / time_running; "<not counted>" when the group never ran
    assert scale(1000, 200, 100) == {"raw": 1000, "ratio": 0.5, "scaled": 2000}
    assert scale(7, 10, 10) == {"raw": 7, "ratio": 1.0, "scaled": 7}
    assert scale(0, 10, 0)["scaled"] is None


@pytest.mark.skipif(not HAS_PMU, reason="no CPU PMU here (/sys/bus/event_source/devices/cpu is absent, as in "
                                        "most VMs): hardware events and their multiplexing cannot be counted")
def test_hardware_groups_multiplexed_are_scaled_up():
    # more groups than the PMU has counters: the kernel time-shares them, running < enabled
    many = [Counters({k: v for k, v in EVENTS.items() if k in ("cycles", "instructions", "llc_misses")})
            for _ in range(8)]
    for probes in many:
        probes.start()
    busy(0.3)
    for probes in many:
        probes.stop()
    results = [probes.result() for probes in many]
    ratios = [r["ratio"]["cycles"] for r in results if "cycles" in r["ratio"]]
    assert ratios and min(ratios) < 1.0
    for r in results:
        for name, value in r["events"].items():
            assert value >= r["raw"][name]
            if r["ratio"][name] < 1.0:
                assert value > r["raw"][name]
