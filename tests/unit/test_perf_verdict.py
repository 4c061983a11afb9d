"""benchmarks/run_perf.py's verdicts: a paired target whose pairs spread across its threshold is undecided,
neither passed nor failed on the machine's noise; a steady one is decided either way."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from perf.measure import Samples, verdicts  # noqa: E402
from perf.table import notes, render  # noqa: E402
from perf.targets import Check, Pair  # noqa: E402

STREAM = Check("copy.rank0", "STREAM copy, rank 0", "MB/s", "ratio", 0.98, True, statistic="paired")
OVERHEAD = Check("wall", "launch overhead", "s", "difference", 0.1, False, statistic="paired", strict=True)
BEST = Check("bw", "1 MiB bandwidth", "MB/s", "ratio", 0.95, True)


def verdict(check: Check, reference: list[float], subject: list[float], problems=()):
    pair = Pair(name="p", reference=["c"], subject=["v"], read_reference=None, read_subject=None, checks=[check],
                repeat=len(reference))
    results = {"p": {"reference": Samples(values={check.key: reference}),
                     "subject": Samples(values={check.key: subject}, problems=list(problems))}}
    (only,) = verdicts([pair], results)
    return only


def test_steady_pairs_above_the_threshold_pass_decided():
    v = verdict(STREAM, [100.0] * 9, [100.0, 101, 102, 99.5, 100.5, 103, 101.5, 100.2, 99.8])
    assert v.passed and v.decided and v.met and v.result == "PASS"
    assert 0.98 < v.interval[0] <= v.measured <= v.interval[1]


def test_pairs_spread_across_the_threshold_are_undecided_not_failed():
    # STREAM on a shared VM: one process draws twice the bandwidth of the next; the median lands below 98% but
    # the pairs reach from 65% to 115%
    subject = [65.0, 115, 96, 104, 70, 110, 97, 99, 93]
    v = verdict(STREAM, [100.0] * 9, subject)
    assert not v.passed and v.measured == 0.97
    assert not v.decided and not v.met and v.result == "undecided"
    assert v.interval[0] < 0.98 < v.interval[1]
    (line,) = [n for n in notes([v]) if n.startswith("undecided")]
    assert "97.0%" in line and ">= 98%" in line
    assert render([v]).splitlines()[-1].endswith("undecided")


def test_steady_pairs_over_the_limit_fail_decided():
    v = verdict(OVERHEAD, [0.30] * 9, [0.45, 0.44, 0.46, 0.45, 0.47, 0.43, 0.45, 0.46, 0.44])
    assert not v.passed and v.decided and v.result == "FAIL"
    v = verdict(OVERHEAD, [0.30] * 9, [0.36, 0.37, 0.35, 0.36, 0.38, 0.36, 0.37, 0.35, 0.36])
    assert v.passed and v.decided and v.result == "PASS"


def test_a_failed_run_fails_whatever_the_spread_and_a_best_of_has_no_interval():
    v = verdict(STREAM, [100.0] * 9, [65.0, 115, 96, 104, 70, 110, 97, 99, 93], problems=["repetition 3: exit 1"])
    assert v.decided and not v.met and v.result == "FAIL"
    v = verdict(BEST, [100.0, 90, 80], [99.0, 70, 60])
    assert v.interval is None and v.decided and v.passed and v.result == "PASS"
