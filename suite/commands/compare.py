"""``vnetbench compare BASELINE CURRENT``: what changed between two stores, and whether it regressed.

Runs are matched by configuration (kernel, topology, ranks, kernel parameters, binding).
For each metric: the change of the median, Welch's t-test over the repetitions and a noise
floor (the larger coefficient of variation of the two sides). A change is a regression
only when it is in the bad direction, significant and beyond both --threshold and the noise
floor. Exit 1 when anything regressed (or a configuration that passed no longer does), 0 otherwise.
"""

import argparse
import sys

from vnetbench.analysis import formats

from . import COMMANDS


def percent(text: str) -> float:
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage such as 5%") from None
    if not 0 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: 0% to 1000%")
    return value


def probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: between 0 and 1")
    return value


def register(sub):
    parser = sub.add_parser("compare", help=COMMANDS["compare"], description=__doc__.replace("``", ""))
    parser.add_argument("baseline", metavar="BASELINE", help="store of the reference runs")
    parser.add_argument("current", metavar="CURRENT", help="store of the runs to judge")
    parser.add_argument("--threshold", type=percent, default=5.0, metavar="PCT",
                        help="smallest change that counts, in %% of the baseline (default 5%%)")
    parser.add_argument("--alpha", type=probability, default=0.05, metavar="P",
                        help="significance level of the t-test (default 0.05)")
    parser.add_argument("--format", choices=formats.choices("compare"), default="table",
                        help="markdown suits CI comments (default table)")
    parser.add_argument("--all", action="store_true", help="list every metric, not only the changes")
    formats.add_written(parser, "compare")  # --junit FILE.xml
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from vnetbench.analysis import compare

    written = formats.asked(args, "compare")  # each checked before the stores are read
    sides = []
    for option, path in (("BASELINE", args.baseline), ("CURRENT", args.current)):
        side, loaded = compare.Side.read(path, option)  # streamed: its configurations' values, not its records
        for warning in loaded.warnings():
            print(f"vnetbench: warning: {warning}", file=sys.stderr)
        sides.append(side)
    result = compare.compare(*sides, args.threshold, args.alpha)
    print(compare.render_comparison(result, args.format, args.all))
    for module, path in written:
        what = module.write_compare(path, result)
        print(f"vnetbench: {what} written to {path}", file=sys.stderr)
    if not result.changes and not result.broken:
        print("vnetbench: no configuration appears in both stores with passing runs; nothing compared",
              file=sys.stderr)
    return 1 if result.regressed else 0
