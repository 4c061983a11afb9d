"""Built-in parsers of output the field trusts, registered by name (adding one is adding a file).

A parser module exposes ``parse(text) -> dict`` (the record's metrics; raises ``ParseError`` with
the reason when the output holds none of what it reads, or holds it damaged), and the contract's
``metrics(m)``, ``table(names)`` and ``headline(m)`` for what it wrote (kernels/contract.py).
"""

from vnetbench.core.registry import Registry

PARSERS = Registry("parser", {
    "osu": "osu",
    "imb": "imb",
    "lammps": "lammps",
}, package=__name__)


class ParseError(ValueError):
    """The output lacks what the parser reads, or holds it damaged: the run is invalid."""


def parse_number(text: str) -> float:
    """``text`` as a float; ParseError naming it when it is not one (garbled output)."""
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{text!r} is not a number") from None
