"""vnetbench.stats against values computed by hand or by scipy (quoted, not imported)."""

import math

import pytest

from vnetbench.analysis import stats


def test_summary_of_three_repetitions():
    s = stats.summarise([10.0, 12.0, 11.0])
    assert (s.n, s.median, s.mean, s.min, s.max) == (3, 11.0, 11.0, 10.0, 12.0)
    assert s.stdev == pytest.approx(1.0)
    assert s.cv == pytest.approx(1 / 11)
    assert s.spread_pct == pytest.approx(100 / 11)  # half the range (1) over the median (11)
    assert not s.noisy


def test_noisy_above_ten_percent_and_single_values():
    assert stats.summarise([6.0, 9.0, 7.5]).cv == pytest.approx(0.2)
    assert stats.summarise([6.0, 9.0, 7.5]).noisy
    one = stats.summarise([5.0])
    assert one.stdev is None and one.cv is None and not one.noisy
    assert one.to_dict()["cv_pct"] is None


def test_even_count_median_and_refusals():
    assert stats.summarise([1, 2, 3, 10]).median == 2.5
    for bad in ([], [1.0, math.nan], [math.inf]):
        with pytest.raises(ValueError):
            stats.summarise(bad)


@pytest.mark.parametrize("t, df, p", [
    (2.776445, 4, 0.05),  # textbook 95% two-sided critical values
    (12.7062, 1, 0.05),
    (2.228139, 10, 0.05),
    (1.959964, 1e7, 0.05),
    (0.0, 3, 1.0),
])
def test_t_distribution_two_sided_p(t, df, p):
    assert stats.t_two_sided_p(t, df) == pytest.approx(p, abs=2e-6)


def test_welch_matches_scipy():
    # scipy.stats.ttest_ind([1, 2, 3], [4, 5, 6], equal_var=False): t = -3.6742, p = 0.021311
    result = stats.welch([1, 2, 3], [4, 5, 6])
    assert result.statistic == pytest.approx(3.674235, rel=1e-6)  # sign: second sample minus first
    assert result.df == pytest.approx(4.0)
    assert result.p_value == pytest.approx(0.021311, abs=1e-6)
    # unequal variances, by hand: t = 8.5 / sqrt(5/12 + 100/3) = 1.46313, Welch-Satterthwaite df = 2.05010;
    # p = 0.278092 by numerical integration of the t density
    result = stats.welch([10, 11, 12, 13], [10, 20, 30])
    assert result.statistic == pytest.approx(1.463127, rel=1e-6)
    assert result.df == pytest.approx(2.050099, rel=1e-6)
    assert result.p_value == pytest.approx(0.278092, abs=1e-5)
    assert result.significant(0.05) is False


def test_welch_degenerate_cases():
    untestable = stats.welch([1.0], [2.0, 3.0])
    assert untestable.p_value is None and untestable.significant() is None
    assert "2 repetitions" in untestable.reason
    assert stats.welch([2.0, 2.0], [2.0, 2.0]).p_value == 1.0
    assert stats.welch([2.0, 2.0], [3.0, 3.0]).p_value == 0.0


def test_betainc_symmetry_and_bounds():
    assert stats.betainc(2, 3, 0) == 0 and stats.betainc(2, 3, 1) == 1
    assert stats.betainc(2.5, 1.5, 0.3) + stats.betainc(1.5, 2.5, 0.7) == pytest.approx(1.0)
    assert stats.betainc(1, 1, 0.37) == pytest.approx(0.37)  # the uniform distribution


def test_change_pct():
    assert stats.change_pct(10.0, 13.0) == pytest.approx(30.0)
    assert stats.change_pct(0.0, 1.0) is None
