"""Running the pairs: reference and subject alternately, repetition by repetition; then the verdicts.

Repetitions go round every pair before the next starts, and the order within a pair flips
each time, so that a burst of load from elsewhere on the machine falls on both sides alike.
"""

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from . import programs
from .targets import Check, Pair, Unusable, median_interval

SIDES = ("reference", "subject")
# other processes using more cores than this during a run that decided a verdict make it
# inconclusive: the table marks it, and only a quieter rerun can settle it
NOISY_CORES = 0.5


@dataclass
class Samples:
    values: dict[str, list[float | None]] = field(default_factory=dict)  # per repetition; None: failed
    walls: list[float] = field(default_factory=list)
    others_busy: list[float | None] = field(default_factory=list)  # cores used by other processes
    problems: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    pair: str
    check: Check
    reference: float | None
    subject: float | None
    measured: float | None
    passed: bool
    reference_samples: list[float]
    subject_samples: list[float]
    problem: str | None = None
    load: tuple[float | None, float | None] = (None, None)  # other processes' cores, deciding runs
    pairs: list[float] = field(default_factory=list)  # the measure of each repetition: the noise
    # a paired verdict's 90% bootstrap interval of the median of ``pairs`` (None: not a paired verdict)
    interval: tuple[float, float] | None = None

    @property
    def noisy(self) -> bool:
        return any(value is not None and value > NOISY_CORES for value in self.load)

    @property
    def decided(self) -> bool:
        """False when the pairs spread so wide that the median could lie on the threshold's other side: the
        machine's noise, not vnetbench, would decide (more repetitions narrow the interval)."""
        return self.problem is not None or self.check.decided(self.interval)

    @property
    def met(self) -> bool:
        return self.passed and self.decided

    @property
    def result(self) -> str:
        return ("PASS" if self.passed else "FAIL") if self.decided else "undecided"

    def to_dict(self) -> dict:
        c = self.check
        return {"pair": self.pair, "target": c.key, "label": c.label, "unit": c.unit, "kind": c.kind,
                "threshold": c.threshold, "higher_is_better": c.higher_is_better, "statistic": c.statistic,
                "reference": self.reference, "subject": self.subject, "measured": self.measured,
                "passed": self.passed, "decided": self.decided, "interval": self.interval, "result": self.result,
                "problem": self.problem, "noisy": self.noisy,
                "others_busy_cores": {"reference": self.load[0], "subject": self.load[1]},
                "samples": {"reference": self.reference_samples, "subject": self.subject_samples},
                "pairs": self.pairs}


def measure(pairs: list[Pair], log: Callable[[str], None] = lambda text: None,
            quiet_wait: float = 0.0) -> dict[str, dict[str, Samples]]:
    """pair name -> side -> samples, every run of every pair, interleaved.

    With ``quiet_wait`` > 0, each run first waits up to that many seconds for other processes
    to leave the cores (mostly) idle.
    """
    results = {pair.name: {side: Samples() for side in SIDES} for pair in pairs}
    for pair in pairs:
        if pair.warmup:
            for side in SIDES:
                run = programs.run(pair.reference if side == "reference" else pair.subject, pair.timeout,
                                   pair.reference_env if side == "reference" else None)
                log(f"{pair.name} {side} warm-up: {run.wall_s:.1f} s" + (f" ({run.problem()})" if run.problem() else ""))
    for repetition in range(max(pair.repeat for pair in pairs)):
        for pair in pairs:
            if repetition >= pair.repeat:
                continue
            order = SIDES if repetition % 2 == 0 else SIDES[::-1]
            for side in order:
                argv = pair.reference if side == "reference" else pair.subject
                reader = pair.read_reference if side == "reference" else pair.read_subject
                if quiet_wait > 0:
                    programs.wait_for_quiet(quiet_wait)
                run = programs.run(argv, pair.timeout, pair.reference_env if side == "reference" else None)
                into = results[pair.name][side]
                into.walls.append(run.wall_s)
                into.others_busy.append(run.others_busy)
                problem, got = run.problem(), {}
                if problem is None:
                    try:
                        got = reader(run)
                    except (Unusable, KeyError, TypeError, ValueError) as exc:
                        problem = f"unusable output: {exc}"
                # every key the reader gives is kept (checks and diagnostics), one slot per repetition
                for key in {*got, *(check.key for check in pair.checks), *into.values}:
                    into.values.setdefault(key, [None] * repetition).append(got.get(key))
                if problem:
                    into.problems.append(f"repetition {repetition + 1}: {problem}")
                busy = "" if run.others_busy is None else f", other load {run.others_busy:.1f} cores"
                log(f"{pair.name} {side} {repetition + 1}/{pair.repeat}: {run.wall_s:.1f} s{busy}"
                    + (f" ({problem})" if problem else ""))
    return results


def verdicts(pairs: list[Pair], results: dict[str, dict[str, Samples]]) -> list[Verdict]:
    out = []
    for pair in pairs:
        ref, sub = results[pair.name]["reference"], results[pair.name]["subject"]
        for check in pair.checks:
            ref_samples, sub_samples = ref.values.get(check.key, []), sub.values.get(check.key, [])
            problems = [f"reference {p}" for p in ref.problems] + [f"vnetbench {p}" for p in sub.problems]
            paired = [r is not None and s is not None for r, s in zip(ref_samples, sub_samples)]
            if not any(paired):
                out.append(Verdict(pair.name, check, None, None, None, False, ref_samples, sub_samples,
                                   "; ".join(problems) or "no samples"))
                continue
            reference, subject, measured = check.compare(ref_samples, sub_samples)
            load = _load(check, ref_samples, ref.others_busy), _load(check, sub_samples, sub.others_busy)
            each = check.per_pair(ref_samples, sub_samples)
            interval = median_interval(each) if check.statistic == "paired" else None
            # a failed run is a failed target even when the other repetitions looked fine
            out.append(Verdict(pair.name, check, reference, subject, measured,
                               check.passes(measured) and not problems, ref_samples, sub_samples,
                               "; ".join(problems) or None, load, each, interval))
    return out


def _load(check, samples, busy) -> float | None:
    """Other processes' load during the run(s) that decided one side's value."""
    runs = [(value, cores) for value, cores in zip(samples, busy) if value is not None and cores is not None]
    if not runs:
        return None
    if check.statistic == "best":
        pick = max if check.higher_is_better else min
        return pick(runs, key=lambda run: run[0])[1]
    return statistics.median(cores for _, cores in runs)
