"""Comparing two stores run by run configuration: per-metric change, significance, noise floor, verdict.

A change is a regression only when it is in the bad direction, statistically significant
(Welch's t-test over the repetitions, two-sided, p < alpha) and larger than both the
threshold and the noise floor. The noise floor is the larger coefficient of variation of
the two sides: a shift smaller than the runs' own scatter is not reported as a change, like
pyperf, which calls such differences "not significant" instead of printing a percentage.
A configuration whose runs on either side have a timing caveat that makes no cost of them (an emulated
CPU: tables.timing_caveat) gets the verdict "n/a", never a regression.
"""

from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..kernels.contract import Metric
from . import format as fmt
from . import metrics as registry
from .records import ConfigKey, Loaded, config_key, describe_key, stream
from .render import Document, Grid
from .stats import Summary, TestResult, change_pct, summarise, welch, worse_pct
from .tables import EMULATED_CPU, emulated_cpu

VERDICTS = ("regression", "improvement", "untested", "within noise", "within threshold", "not significant",
            "unchanged", "n/a")


@dataclass
class Change:
    key: ConfigKey
    metric: Metric
    baseline: Summary
    current: Summary
    test: TestResult
    change_pct: float | None  # current median against baseline median, signed
    worse_pct: float | None  # the same, positive when worse; None when the direction is unknown
    noise_floor_pct: float
    verdict: str

    def to_dict(self, alpha: float) -> dict:
        kernel, topology, ranks, params, bind, options = self.key
        return {"kernel": kernel, "topology": topology, "ranks": ranks, "params": params, "bind": bind,
                "run_options": options,
                "metric": self.metric.name, "unit": self.metric.unit, "better": self.metric.better,
                "baseline": self.baseline.to_dict(), "current": self.current.to_dict(),
                "baseline_median": self.baseline.median, "current_median": self.current.median,
                "change_pct": self.change_pct, "worse_pct": self.worse_pct, "noise_floor_pct": self.noise_floor_pct,
                "test": self.test.test, "t": self.test.statistic, "df": self.test.df, "p_value": self.test.p_value,
                "significant": self.test.significant(alpha), "verdict": self.verdict,
                "test_note": self.test.reason}


@dataclass
class Comparison:
    threshold_pct: float
    alpha: float
    changes: list[Change] = field(default_factory=list)
    only_baseline: list[tuple] = field(default_factory=list)
    only_current: list[tuple] = field(default_factory=list)
    broken: list[tuple[tuple, dict]] = field(default_factory=list)  # ok in baseline, no ok run now
    # (key, metric name, why) for what is measured on one side only: a metric one side lacks, or a
    # configuration with no passing baseline run that passes now (nothing to compare it with)
    unmatched: list[tuple[tuple, str, str]] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == "regression"]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions or self.broken)

    def counts(self) -> dict[str, int]:
        out = {verdict: 0 for verdict in VERDICTS}
        for change in self.changes:
            out[change.verdict] += 1
        return out

    def to_dict(self) -> dict:
        return {"threshold_pct": self.threshold_pct, "alpha": self.alpha, "regressed": self.regressed,
                "counts": self.counts(), "changes": [c.to_dict(self.alpha) for c in self.changes],
                "only_in_baseline": [describe_key(k, True) for k in self.only_baseline],
                "only_in_current": [describe_key(k, True) for k in self.only_current],
                "broken": [{"configuration": describe_key(k, True), "statuses": s} for k, s in self.broken],
                "unmatched": [{"configuration": describe_key(k, True), "metric": m, "why": why}
                              for k, m, why in self.unmatched]}


def verdict(worse: float | None, test: TestResult, threshold_pct: float, noise_floor_pct: float,
            alpha: float) -> str:
    if worse is None:
        return "unchanged" if test.p_value is None or not test.significant(alpha) else "not significant"
    if test.p_value is None:
        return "untested" if abs(worse) > threshold_pct else "within threshold"
    if not test.significant(alpha):
        return "not significant"
    if abs(worse) <= threshold_pct:
        return "within threshold"
    if abs(worse) <= noise_floor_pct:
        return "within noise"
    return "regression" if worse > 0 else "improvement"


class Side:
    """One side of a comparison, a record at a time: per configuration each metric's values (in store
    order) and the statuses of the runs that did not pass; never the records."""

    def __init__(self):
        self.measured: dict[ConfigKey, dict[str, tuple[Metric, array]]] = defaultdict(dict)
        self.failed: dict[ConfigKey, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.emulated: set[ConfigKey] = set()  # configurations with a run on an emulated CPU

    @classmethod
    def read(cls, path, option: str) -> tuple["Side", Loaded]:
        """The store at ``path`` streamed into a side, with what was skipped, migrated or a duplicate."""
        side, loaded = cls(), Loaded(Path(path), [])
        for _, record in stream(path, option, loaded):
            side.add(record)
        return side, loaded

    @classmethod
    def of(cls, records) -> "Side":
        side = cls()
        for record in records:
            side.add(record)
        return side

    def add(self, record: dict) -> None:
        key = config_key(record)
        if record["status"] != "ok":
            self.failed[key][record["status"]] += 1
            return
        if emulated_cpu(record):
            self.emulated.add(key)
        for metric, value in registry.extract(record):
            self.measured[key].setdefault(metric.name, (metric, array("d")))[1].append(value)


def compare(baseline, current, threshold_pct: float = 5.0, alpha: float = 0.05) -> Comparison:
    """Every metric of every configuration found in both sides (records, or a Side each), with its verdict."""
    base_side, cur_side = (side if isinstance(side, Side) else Side.of(side) for side in (baseline, current))
    base, base_failed = base_side.measured, base_side.failed
    cur, cur_failed = cur_side.measured, cur_side.failed
    result = Comparison(threshold_pct, alpha)
    for key in sorted(set(base) | set(base_failed) | set(cur) | set(cur_failed), key=str):
        if key not in base and key not in base_failed:
            result.only_current.append(key)
            continue
        if key not in cur and key not in cur_failed:
            result.only_baseline.append(key)
            continue
        if key in base and key not in cur:
            result.broken.append((key, dict(cur_failed[key])))
            continue
        if key not in base:
            statuses = ", ".join(f"{n} {status}" for status, n in base_failed[key].items())
            result.unmatched += [(key, name, f"no passing run in the baseline ({statuses})") for name in cur[key]]
            continue
        result.unmatched += [(key, name, "measured in the current store only") for name in cur[key]
                             if name not in base[key]]
        for name, (metric, before) in base[key].items():
            if name not in cur[key]:
                result.unmatched.append((key, name, "measured in the baseline only"))
                continue
            after = cur[key][name][1]
            b, c = summarise(before), summarise(after)
            test = welch(before, after)
            floor = max((s.cv or 0.0) for s in (b, c)) * 100
            worse = worse_pct(b.median, c.median, metric.better)
            emulated = key in base_side.emulated or key in cur_side.emulated
            result.changes.append(Change(key, metric, b, c, test, change_pct(b.median, c.median), worse, floor,
                                         "n/a" if emulated else verdict(worse, test, threshold_pct, floor, alpha)))
    return result


# --- for people and CI comments ----------------------------------------------------------

SHOWN = ("regression", "improvement", "untested")


def label(key: ConfigKey) -> str:
    import json

    from .tables import params_label

    setting = params_label(key.kernel, json.loads(key.params), [])
    return describe_key(key) + (f", {setting}" if setting else "")


def rows(result: Comparison, show_all: bool = False) -> tuple[list[str], list[list[str]]]:
    headers = ["configuration", "metric", "baseline", "current", "change", "p", "noise floor", "verdict"]
    order = {v: i for i, v in enumerate(VERDICTS)}
    chosen = [c for c in result.changes if show_all or c.verdict in SHOWN]
    chosen.sort(key=lambda c: (order[c.verdict], -abs(c.worse_pct or 0)))
    body = [[label(c.key), f"{c.metric.name} ({c.metric.unit})" if c.metric.unit else c.metric.name,
             fmt.summary(c.baseline), fmt.summary(c.current), fmt.signed_pct(c.change_pct),
             "-" if c.test.p_value is None else f"{c.test.p_value:.3g}", fmt.pct(c.noise_floor_pct), c.verdict]
            for c in chosen]
    return headers, body


def summary_lines(result: Comparison) -> list[str]:
    counts = result.counts()
    configs = len({c.key for c in result.changes})
    head = (f"{len(result.regressions)} regression(s), {counts['improvement']} improvement(s) in {len(result.changes)} "
            f"metric(s) of {configs} configuration(s); threshold {result.threshold_pct:g}%, significance "
            f"p < {result.alpha:g} (Welch's t-test), noise floor = the larger CV of the two sides")
    lines = [head]
    quiet = {v: n for v, n in counts.items() if n and v not in ("regression", "improvement")}
    if quiet:
        lines.append("others: " + ", ".join(f"{n} {v}" for v, n in quiet.items()))
    if counts["n/a"]:
        lines.append(f"n/a: {counts['n/a']} metric(s) of runs on QEMU's TCG ({EMULATED_CPU}); compare KVM runs")
    if counts["untested"]:
        lines.append("untested: beyond the threshold but with fewer than 2 repetitions on a side; "
                     "run with --repeat 3 or more to test")
    for key, statuses in result.broken:
        lines.append(f"BROKEN: {label(key)} passed in the baseline and has no passing run now "
                     f"({', '.join(f'{n} {s}' for s, n in statuses.items())})")
    if result.unmatched:
        key, name, why = result.unmatched[0]
        lines.append(f"{len(result.unmatched)} metric(s) not compared, e.g. {name} of {label(key)}: {why}")
    if result.only_baseline:
        lines.append(f"{len(result.only_baseline)} configuration(s) only in the baseline, e.g. "
                     f"{label(result.only_baseline[0])}")
    if result.only_current:
        lines.append(f"{len(result.only_current)} configuration(s) only in the current store, e.g. "
                     f"{label(result.only_current[0])}")
    return lines


def render_comparison(result: Comparison, form: str = "table", show_all: bool = False) -> str:
    headers, body = rows(result, show_all)
    status = "**regressed**" if result.regressed else "no regression"
    doc = Document([Grid(headers, body)] if body else [], before=summary_lines(result),
                   heading=f"vnetbench compare: {status}", csv_rows=[headers, *body], data=result.to_dict())
    from . import formats

    return formats.render(form, doc)
