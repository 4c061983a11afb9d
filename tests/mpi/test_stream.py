"""stream under real mpirun at 1, 2 and 4 ranks (4 oversubscribed), tiny arrays."""

import pytest

from conftest import direct_launch, requires_mpi

pytestmark = [pytest.mark.timeout(120), requires_mpi]


def run_kernel(ranks, args, tmp_path):
    return direct_launch("stream", ranks, args, tmp_path)


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_stream_measures_and_validates(ranks, tmp_path):
    done, record = run_kernel(ranks, ["--array-size", "20000", "--ntimes", "4"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert record["status"] == "ok" and record["validation"]["passed"], record["validation"]
    metrics = record["metrics"]
    assert metrics["array_size"] == 20000 and metrics["ntimes"] == 4
    assert metrics["bytes_per_array"] == 8 * 20000 and metrics["llc_bytes"] > 0
    ops = ("copy", "scale", "add", "triad")
    assert all(metrics["bandwidth_mbps"][op] > 0 for op in ops)
    assert [entry["rank"] for entry in metrics["per_rank"]] == list(range(ranks))
    for entry in metrics["per_rank"]:
        assert all(entry["bandwidth_mbps"][op] > 0 for op in ops)
    for op in ops:
        times = metrics["times_s"][op]
        assert len(times["samples"]) == 4
        assert 0 < times["best"] == times["min"] <= times["avg"] <= times["max"]
    # summed bandwidth uses the slowest rank's time, so it never beats the sum of the ranks' own
    for op in ops:
        assert metrics["bandwidth_mbps"][op] <= sum(e["bandwidth_mbps"][op] for e in metrics["per_rank"]) * 1.0001


def test_stream_refuses_arrays_that_do_not_fit(tmp_path):
    done, record = run_kernel(1, ["--array-size", str(10**12)], tmp_path)
    assert done.returncode == 2 and record is None
    assert "--array-size" in done.stderr and "MemAvailable" in done.stderr
