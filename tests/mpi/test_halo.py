"""halo under real mpirun at 1, 2 and 4 ranks (4 oversubscribed): checks pass, corruption is caught."""

import pytest

from conftest import direct_launch, requires_mpi

pytestmark = [pytest.mark.timeout(120), requires_mpi]


def run_kernel(ranks, args, tmp_path):
    return direct_launch("halo", ranks, args, tmp_path)


@pytest.mark.parametrize("ranks, dims", [(1, [1, 1, 1]), (2, [2, 1, 1]), (4, [2, 2, 1])])
def test_halo_runs_and_every_message_checks_out(ranks, dims, tmp_path):
    done, record = run_kernel(ranks, ["--global", "9,6,5", "--steps", "12", "--reduce-every", "5"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert record["status"] == "ok" and record["validation"]["passed"], record["validation"]
    metrics = record["metrics"]
    assert metrics["dims"] == dims and metrics["global_grid"] == [9, 6, 5]
    assert metrics["steps"] == 12 and metrics["reductions"] == 2
    assert metrics["messages_per_rank_per_step"] == 26 and metrics["bytes_per_rank_per_step"] > 0
    assert metrics["local_cells"]["min"] * ranks <= 9 * 6 * 5 <= metrics["local_cells"]["max"] * ranks
    step = metrics["step_s"]
    assert 0 < step["min"] <= step["median"] <= step["max"] and len(step["samples"]) == 12
    assert metrics["elapsed_s"] >= step["max"]
    for phase in ("compute_s", "exchange_s", "reduce_s"):
        assert 0 < metrics[phase] <= metrics["elapsed_s"]
    assert "26 messages x 12 steps" in record["validation"]["detail"]


def test_faces_only_wide_halo_weak_scaling(tmp_path):
    done, record = run_kernel(2, ["--global", "4,5,3", "--weak", "--neighbours", "6", "--halo-width", "2",
                                  "--compute", "0", "--steps", "6"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert record["status"] == "ok", record["validation"]
    metrics = record["metrics"]
    assert metrics["global_grid"] == [8, 5, 3] and metrics["local_grid"] == [4, 5, 3]
    assert metrics["messages_per_rank_per_step"] == 6 and metrics["compute_passes"] == 0


def test_corrupt_step_is_caught(tmp_path):
    # the unit tests cover other grids; here the real exchange between two ranks must see it
    done, record = run_kernel(2, ["--global", "8", "--steps", "6", "--corrupt-step", "3"], tmp_path)
    assert done.returncode == 1, done.stderr
    assert record["status"] == "invalid" and record["validation"]["passed"] is False
    detail = record["validation"]["detail"]
    assert "from rank 0" in detail and "at step 3" in detail and "direction +x" in detail, detail


def test_refuses_blocks_thinner_than_the_halo(tmp_path):
    done, record = run_kernel(2, ["--global", "1,8,8"], tmp_path)
    assert done.returncode == 2 and record is None
    assert "--global" in done.stderr and "--halo-width" in done.stderr
