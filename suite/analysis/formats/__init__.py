"""The output formats, one module each, listed in FORMATS: a command's ``--format`` choices and its
"also write FILE" options (``--plot``, ``--html``, ``--junit``) come from here.

A format module says what it applies to, ``APPLIES`` (of KINDS), and renders:

- a printed format (``--format NAME``) has ``document(doc) -> str`` for report and compare (a
  ``render.Document``), ``records(records) -> str`` for run, and ``check(kernel)`` where it cannot show
  every kernel (UsageError before anything runs);
- a written format has ``OPTION``, ``METAVAR``, ``HELP`` and ``SUFFIXES`` (None: any file name), and
  ``write_report(path, runs, tables, context)`` or ``write_compare(path, result)``, each returning what it
  wrote ("2 plot(s)") for the command's message.

Adding a format is adding its module and its line here. ``choices`` imports every format module, so their
tops import nothing: rich only when text is rendered, matplotlib only when a plot is drawn.
"""

from collections.abc import Sequence

from vnetbench.core.registry import Registry

KINDS = ("run", "report", "compare")
# name -> module in this package; the order is the order of --format's choices and of the written options
FORMATS = Registry("--format", {
    "table": "table",
    "markdown": "markdown",
    "csv": "csv",
    "json": "json",
    "osu": "osu",
    "plot": "plot",
    "html": "html",
    "junit": "junit",
}, package=__name__, noun="format")


class Choices(Sequence):
    """The printed formats that apply to a kind, found when first asked: argparse asks only when --format is
    given or help is printed, so ``run`` starts without importing a format module."""

    def __init__(self, kind: str):
        self.kind, self._names = kind, None

    def _found(self) -> list[str]:
        if self._names is None:
            self._names = [name for name in FORMATS
                           if self.kind in FORMATS.load(name).APPLIES and not hasattr(FORMATS.load(name), "OPTION")]
        return self._names

    def __getitem__(self, index):
        return self._found()[index]

    def __len__(self) -> int:
        return len(self._found())

    def __repr__(self) -> str:
        return repr(self._found())


def choices(kind: str) -> Choices:
    """The printed formats that apply to ``kind`` ("run", "report" or "compare"): its ``--format`` choices,
    in registry order (a sequence of names, looked up when first read)."""
    return Choices(kind)


def written(kind: str) -> list:
    """The written formats that apply to ``kind``: one ``OPTION FILE`` each."""
    return [FORMATS.load(name) for name in FORMATS if kind in FORMATS.load(name).APPLIES and hasattr(FORMATS.load(name), "OPTION")]


def add_written(parser, kind: str) -> None:
    """Each written format's ``OPTION FILE`` for the command ``kind``."""
    for module in written(kind):
        parser.add_argument(module.OPTION, metavar=module.METAVAR, help=module.HELP)


def asked(args, kind: str) -> list[tuple[object, str]]:
    """(format module, path) of each of ``kind``'s written formats given on the command line."""
    out = []
    for module in written(kind):
        path = getattr(args, module.OPTION.lstrip("-").replace("-", "_"), None)
        if path is not None:
            check_target(module, path)
            out.append((module, path))
    return out


def render(name: str, doc) -> str:
    """``doc`` (report's or compare's render.Document) in the printed format ``name``."""
    return FORMATS.load(name).document(doc)


def run_text(name: str, records: list[dict]) -> str:
    """What ``run`` prints for its ``records`` in the printed format ``name``."""
    return FORMATS.load(name).records(records)


def check_run(name: str, kernel: str) -> None:
    """UsageError, before anything runs, when the format ``name`` cannot show ``kernel``'s records."""
    check = getattr(FORMATS.load(name), "check", None)
    if check is not None:
        check(kernel)


def check_target(module, path: str | None) -> None:
    """UsageError, before anything is read, when a written format cannot write ``path``."""
    from pathlib import Path

    from vnetbench.core.errors import UsageError

    if path is None:
        return
    target = Path(path)
    if module.SUFFIXES and target.suffix.lower() not in module.SUFFIXES:
        raise UsageError(f"{module.OPTION}: {path} should end in {' or '.join(module.SUFFIXES)}")
    if target.is_dir() or not target.parent.is_dir():
        raise UsageError(f"{module.OPTION}: cannot write {path}: "
                         f"{'it is a directory' if target.is_dir() else 'no such folder'}")
