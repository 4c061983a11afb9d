"""A sweep's request: a study's defaults under the explicit options, and the failures counted by status."""

import pytest

from vnetbench import kernels, studies, sweep
from vnetbench.errors import UsageError


def test_the_default_is_the_quick_study():
    quick = studies.get("quick")
    asked = sweep.settle()
    assert (asked.kernel, asked.topologies, asked.ranks, asked.repeat) == (
        quick.kernel, quick.topologies, quick.ranks, quick.repeat)


def test_explicit_options_go_over_the_study_s():
    asked = sweep.settle("quick", "pingpong", ["native"], [2], 3, ["--max-size", "64"])
    assert (asked.kernel, asked.topologies, asked.ranks, asked.repeat) == ("pingpong", ["native"], [2], 3)
    assert asked.params["max_size"] == 64


@pytest.mark.parametrize("name", list(studies.STUDIES))
def test_the_study_s_kernel_options_apply_only_to_its_kernel(name):
    study = studies.get(name)
    assert sweep.settle(name).params == kernels.parse_params(study.kernel, study.kernel_argv)
    other = next(k for k in kernels.names() if k != study.kernel)
    assert sweep.settle(name, other).params == kernels.defaults(other)


def test_an_unknown_kernel_is_refused_naming_the_option():
    with pytest.raises(UsageError, match=r"--kernel: unknown kernel 'nbody'; choose from stream, halo"):
        sweep.settle(kernel="nbody")


def test_failures_are_counted_by_status():
    records = [{"status": s} for s in ("ok", "failed", "timeout", "failed", "ok", "invalid")]
    assert list(sweep.failures(records).items()) == [("failed", 2), ("timeout", 1), ("invalid", 1)]
    assert not sweep.failures([{"status": "ok"}])
