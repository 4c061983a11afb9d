"""The ``vnetbench`` command: parses, dispatches to ``vnetbench.commands``, maps errors to exit codes.

Exit codes: 0 ok, 1 a failed, invalid or regressed run, 2 bad input (nothing was started).

Start-up: what a run costs beyond its job is this process's start and end around it (benchmarks/run_perf.py
measures it against the bare launcher). So a command imports what it uses when it uses it, the collector
skips what start-up made (``main``), and the classes a run makes are plain classes and named tuples, not
dataclasses: the dataclasses module (with inspect, ast and dis, which it imports) and the methods it generates
and compiles for each class were about 20 ms of every run's start on a 2-core EPYC, a fifth of what vnetbench
added to a bare launch (tests/mpi/test_run.py keeps dataclasses and typing out of a run). Modules a run never
imports use dataclasses freely.
"""

import gc
import importlib
import signal
import sys

from . import __version__
from .commands import COMMANDS
from .core.errors import VnetbenchError, interrupt_on_signals
from .core.options import ArgumentParser


def build_parser(only: str | None = None) -> ArgumentParser:
    """The parser. Every command's own, from its module; with ``only`` (a command's name, or "" for none) that
    command's alone, the others being names with their line of help: a module's imports cost start-up time, and
    ``vnetbench --help`` imports none."""
    parser = ArgumentParser(prog="vnetbench", description="MPI benchmarks across VMs, virtual switches and hosts.")
    parser.add_argument("--version", action="version", version=f"vnetbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=summary, add_help=False)
            continue
        try:
            module = importlib.import_module(f".commands.{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.commands.{name}":
                raise
            continue  # command not built yet
        module.register(sub)
    return parser


def command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (vnetbench's own options take no
    value), or None."""
    word = next((arg for arg in argv if not arg.startswith("-")), None)
    return word if word in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    """The command; ``argv`` None: this process is vnetbench (the console script, ``python -m vnetbench``)."""
    process = argv is None
    if process:
        # Start-up makes what lives as long as the process (modules, classes, the parser): the collector's
        # passes over it are wasted, and so is the interpreter's last collection at exit; frozen, they skip it.
        # Each was 10-15 ms of every run, whose whole cost is the start and the end around a short job.
        gc.disable()
    try:
        return _main(sys.argv[1:] if process else argv, process)
    finally:
        if process:
            gc.freeze()


def _main(argv: list[str], process: bool = False) -> int:
    # SIGTERM and SIGHUP unwind like Ctrl-C, so every context manager tears down what it brought up
    interrupt_on_signals()
    try:
        parser = build_parser(command_of(argv) or "")
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "takes_extra", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.extra = extra
        if process:
            gc.freeze()
            gc.enable()  # the command's own work is collected as usual
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args) or 0)
    except VnetbenchError as exc:
        print(f"vnetbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # stdout closed early (| head): not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (KeyboardInterrupt, RuntimeError) as exc:
        if isinstance(exc, RuntimeError):
            # an interrupt while a class was being made (during an import) comes wrapped
            if not isinstance(exc.__cause__, KeyboardInterrupt):
                raise
            exc = exc.__cause__
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"vnetbench: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
