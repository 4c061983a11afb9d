"""Statistics over repetitions: centre, spread, noise, and a significance test. Pure; no I/O.

The test is Welch's two-sample t-test (unequal variances), two-sided, with an exact p-value
from the regularised incomplete beta function, so no scipy is needed. pyperf decides
"significant" with a two-sample t-test at 95% too; a rank test (Mann-Whitney U) is no use
here, since with the study's 3 repetitions per side its smallest two-sided p-value is 0.1.
"""

import math
import statistics
from dataclasses import asdict, dataclass

NOISY_CV = 0.10  # above this coefficient of variation a cell is marked noisy (pyperf warns at 10% too)
# above this share of the machine's cpus used by other work during a run (procs.HostLoad), its cell is marked: a
# job that fills the cores loses about that share of them, so 5% can move a timing by more than twice the 2-point
# differences the suite's comparisons resolve; an idle machine's own daemons stay well under 1%
FOREIGN_LOAD = 0.05


@dataclass(frozen=True)
class Summary:
    """What the repetitions of one configuration say about one metric."""

    n: int
    median: float
    mean: float
    min: float
    max: float
    stdev: float | None  # sample standard deviation; None with one value
    cv: float | None  # stdev / mean; None with one value or a zero mean

    @property
    def spread_pct(self) -> float | None:
        """Half the range as a percentage of the median: the "+-" shown beside it."""
        if not self.median:
            return None
        return (self.max - self.min) / 2 / abs(self.median) * 100

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv > NOISY_CV

    def to_dict(self) -> dict:
        out = asdict(self)
        out["spread_pct"] = self.spread_pct
        out["cv_pct"] = None if self.cv is None else self.cv * 100
        out["noisy"] = self.noisy
        return out


def summarise(values) -> Summary:
    """Summary of at least one finite number; ValueError otherwise."""
    values = [float(v) for v in values]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError("summarise needs at least one value, all finite")
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else None
    cv = stdev / abs(mean) if stdev is not None and mean else None
    return Summary(n=len(values), median=statistics.median(values), mean=mean, min=min(values),
                   max=max(values), stdev=stdev, cv=cv)


@dataclass(frozen=True)
class TestResult:
    test: str
    statistic: float | None
    df: float | None
    p_value: float | None  # None: too few values to test
    reason: str = ""

    def significant(self, alpha: float = 0.05) -> bool | None:
        """True/False at level ``alpha``; None when there was nothing to test."""
        return None if self.p_value is None else self.p_value < alpha


def welch(a, b) -> TestResult:
    """Welch's t-test of "a and b have the same mean", two-sided."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        return TestResult("welch_t", None, None, None,
                          f"needs >= 2 repetitions on each side, has {len(a)} and {len(b)}")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        # both sides constant: identical, or certainly different
        return TestResult("welch_t", 0.0 if ma == mb else math.copysign(math.inf, mb - ma), None,
                          1.0 if ma == mb else 0.0, "no variation on either side")
    t = (mb - ma) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return TestResult("welch_t", t, df, t_two_sided_p(t, df))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2, 0.5, df / (df + t * t)))


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # the continued fraction converges fast on this side of the mean; use symmetry on the other
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    # modified Lentz's method for the continued fraction of I_x(a, b)
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def change_pct(baseline: float, current: float) -> float | None:
    """(current - baseline) / baseline, in %; None when the baseline is zero."""
    if not baseline:
        return None
    return (current - baseline) / abs(baseline) * 100


def worse_pct(reference: float, value: float, better: str | None) -> float | None:
    """How much worse ``value`` is than ``reference``, in % of it (negative: better); None without a direction."""
    if better is None:
        return None
    change = change_pct(reference, value)
    if change is None:
        return None
    return change if better == "lower" else -change
