"""Message-size ladders shared by the point-to-point and collective kernels."""

from vnetbench.core.errors import UsageError

MAX_MESSAGE = 1 << 30


def ladder(min_size: int, max_size: int) -> list[int]:
    """Powers of two from min_size to max_size inclusive."""
    sizes, size = [], min_size
    while size <= max_size:
        sizes.append(size)
        size *= 2
    return sizes


def check_ladder(min_size: int, max_size: int, smallest: int = 1) -> None:
    for option, value in (("--min-size", min_size), ("--max-size", max_size)):
        if value < smallest or value > MAX_MESSAGE or value & (value - 1):
            raise UsageError(f"{option}: {value} is not allowed; use a power of two from {smallest} "
                             f"to {MAX_MESSAGE} bytes")
    if min_size > max_size:
        raise UsageError(f"--min-size: {min_size} is larger than --max-size {max_size}")


def percentile(sorted_values, fraction: float) -> float:
    """Nearest-rank percentile of an ascending sequence."""
    if not len(sorted_values):
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * len(sorted_values) + 0.5)) - 1))
    return float(sorted_values[index])
