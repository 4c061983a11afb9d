"""The verdicts as a plain-text or markdown table."""

from .measure import Verdict

from .measure import NOISY_CORES

HEADER = ("target", "unit", "C reference", "vnetbench", "measured", "pairs (min-max)", "threshold", "other load",
          "result")
NOISY_NOTE = (f"?: a deciding run shared the machine with other processes using more than {NOISY_CORES} "
              f"cores; inconclusive: rerun with more --repeat or --quiet-wait")


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    digits = 3 if unit in ("us", "ms", "s") else 0
    return f"{value:,.{digits}f}"


def _measure(value: float | None, v: Verdict) -> str:
    if value is None:
        return "-"
    if v.check.kind == "ratio":
        return f"{value * 100:.1f}%"
    if v.check.kind == "value":
        return f"{value:.3f} {v.check.unit}"
    return f"{value:+.3f} {v.check.unit}"


def _measured(v: Verdict) -> str:
    return _measure(v.measured, v)


def _spread(v: Verdict) -> str:
    """Lowest and highest of the per-repetition measures: how noisy the machine was."""
    if not v.pairs:
        return "-"
    return f"{_measure(min(v.pairs), v)} - {_measure(max(v.pairs), v)}"


def _threshold(v: Verdict) -> str:
    c = v.check
    sign = "<" if c.strict else ("<=" if not (c.kind == "ratio" and c.higher_is_better) else ">=")
    if c.kind == "ratio":
        return f"{sign} {c.threshold * 100:.0f}%"
    if c.kind == "value":
        return f"{sign} {c.threshold:.2f} {c.unit}"
    return f"{sign} {c.threshold:+.2f} {c.unit}"


def _load(v: Verdict) -> str:
    return " / ".join("?" if value is None else f"{value:.1f}" for value in v.load)


def rows(verdicts: list[Verdict]) -> list[tuple[str, ...]]:
    return [(v.check.label, v.check.unit, _number(v.reference, v.check.unit), _number(v.subject, v.check.unit),
             _measured(v), _spread(v), _threshold(v), _load(v),
             v.result + ("?" if v.noisy else "")) for v in verdicts]


def render(verdicts: list[Verdict], markdown: bool = False) -> str:
    body = rows(verdicts)
    if markdown:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in [HEADER, *body]) for i in range(len(HEADER))]
    right = {2, 3, 4, 5, 7}

    def line(row):
        return "  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                         for i, (cell, w) in enumerate(zip(row, widths))).rstrip()
    return "\n".join([line(HEADER), line(tuple("-" * w for w in widths)), *map(line, body)])


def notes(verdicts: list[Verdict]) -> list[str]:
    out = [f"problem: {v.check.label}: {v.problem}" for v in verdicts if v.problem]
    out += [f"undecided: {v.check.label}: the median of the pairs is {_measure(v.measured, v)}, its 90% bootstrap "
            f"interval {_measure(v.interval[0], v)} to {_measure(v.interval[1], v)} reaches across {_threshold(v)}: "
            f"this machine's noise, not vnetbench, would decide; more --repeat narrows it"
            for v in verdicts if not v.decided]
    if any(v.noisy for v in verdicts):
        out.append(NOISY_NOTE)
    return out

