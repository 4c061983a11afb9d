"""The namd and quick studies run md: sizes, steps within the time budget, rank counts that fit."""

import pytest

from vnetbench import kernels
from vnetbench.engine import studies


@pytest.mark.parametrize("cpus", [1, 2, 4, 8, 16, 64])
def test_namd_runs_md_at_stmv_size_within_the_budget(cpus):
    study = studies.get("namd", cpus)
    assert study.kernel == "md" and study.topologies == studies.SIX and study.repeat == 3
    params = kernels.parse_params("md", study.kernel_argv)
    assert params["system"] == "stmv"
    # with PME, as NAMD's STMV benchmark, every 2nd step: the step count is a multiple of it
    assert kernels.get("md").resolve(params)["electrostatics"] == "pme" and params["steps"] % 2 == 0
    kernels.get("md").check(kernels.get("md").resolve(params), max(study.ranks))
    # ranks never outnumber the cpus: no oversubscribed baseline
    assert study.ranks and max(study.ranks) <= max(1, cpus)
    runs = studies.namd_runs(cpus, study.ranks, study.repeat)
    per_step = studies.STMV_STEP_S * 2 / max(2, cpus)
    estimate = runs * (studies.STMV_SETUP_S + params["steps"] * per_step)
    assert params["steps"] == studies.STUDY_STEPS or estimate <= studies.NAMD_BUDGET_S or params["steps"] == 10
    text = " ".join(study.notes)
    assert f"{params['steps']} steps instead of the study's 500" in text and "1,064,960 atoms" in text
    assert "halo stays available" in text and "PME" in text


def test_namd_on_two_cpus_leaves_out_what_cannot_be_compared():
    study = studies.get("namd", 2)
    assert study.ranks == [2]
    assert "4-VM configurations" in " ".join(study.notes)
    # 1vm runs count double: 2 ranks on its one vCPU take twice as long
    assert studies.namd_runs(2, [2], 1) == 1 + 2 + 1 + 1


def test_quick_runs_a_small_md_system():
    study = studies.get("quick", 2)
    assert study.kernel == "md"
    params = kernels.parse_params("md", study.kernel_argv)
    assert params["cells"] == (20, 20, 20) and params["steps"] == 100
    assert study.topologies == ["native", "2vm-1vswitch", "2vm-2vswitch"]
