"""Argument parsing that raises UsageError (one line, exit 2) instead of printing usage and exiting.

argparse names the option in front of a type's message ("argument --ranks: ..."), so the
types below only say what was wrong and what is allowed.
"""

import argparse
import math

from .errors import UsageError


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _bounded(convert, what, lower, upper):
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        if value < lower or (upper is not None and value > upper):
            allowed = f"{lower} to {upper}" if upper is not None else f">= {lower}"
            raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: {allowed}")
        return value

    parse.__name__ = what
    return parse


def int_range(lower: int = 1, upper: int | None = None):
    """An argparse type for a whole number in [lower, upper]."""
    return _bounded(int, "a whole number", lower, upper)


def float_range(lower: float = 0.0, upper: float | None = None):
    return _bounded(float, "a number", lower, upper)
