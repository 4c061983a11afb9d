"""How numbers read in every table vnetbench prints: one formatter, used by every renderer."""


def number(value) -> str:
    """4 significant digits below 1000, thousands separated above; "-" for nothing; text as is."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def signed_pct(value) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def pct(value) -> str:
    return "-" if value is None else f"{value:.1f}%"


def scaling(speedup: float, efficiency: float) -> str:
    """A speedup and its parallel efficiency: "1.90x (95%)"."""
    return f"{speedup:.2f}x ({efficiency * 100:.0f}%)"


def summary(s) -> str:
    """A stats.Summary as "median +-half the range % xN" (the spread only with repetitions)."""
    spread = f" +-{s.spread_pct:.1f}%" if s.n > 1 and s.spread_pct is not None else ""
    return f"{number(s.median)}{spread} x{s.n}"


def value(item) -> str:
    """A table value: a number, a {part: number} mapping ("a 1, b 2") or a list of numbers ("1, 2")."""
    if isinstance(item, dict):
        return ", ".join(f"{key} {number(v)}" for key, v in item.items())
    if isinstance(item, (list, tuple)):
        return ", ".join(number(v) for v in item)
    return number(item)
