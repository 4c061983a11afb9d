"""The shell examples of README.md and docs/*.md: found, checked against their marks, parsed, run.

Every fenced block in ``sh``, ``bash``, ``shell`` or ``console`` has an HTML comment on the line before it,
``<!-- example: MARK -->``, and MARK is one of ``MARKS``; docs/tests.md says what each means. The unit tier checks
the marks and parses every ``vnetbench`` line with the CLI's own parser (nothing started); the mpi and emulation
tiers run the blocks marked to run, in a folder of their own.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"sh", "bash", "shell", "console"}
# mark -> which tier runs the block ("" for none: the mark says what this machine, or a test, lacks)
MARKS = {
    "runs": "mpi",
    "dry-run": "mpi",
    "runs as root": "emulation",
    "runs with LAMMPS": "apps",
    "runs with Debian's MPIs": "mpi_flavours",
    "long": "",
    "installs": "",
    "needs a KVM host": "",
    "needs a cluster": "",
    "needs a program": "",
}
MARK = re.compile(r"^<!-- example: (.+?) -->$")
FENCE = re.compile(r"^```(\S*)\s*$")
# the folder the runnable examples run in holds these stores (copies of a crafted study store), so that report
# and compare have something to read: the default store, and the two files the examples compare
STUDY = ROOT / "tests" / "data" / "stores" / "study.jsonl"
SEEDED = ("baseline.jsonl", "current.jsonl")
HELLO = ROOT / "tests" / "mpi_flavours" / "hello.c"  # the C program docs/mpi.md compiles


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    mark: str | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(paths=None) -> list[Block]:
    """Every fenced shell block of the pages, with the mark on the line before it (None when there is none)."""
    found = []
    for path in paths or pages():
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if not fence:
                i += 1
                continue
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            if fence.group(1) in SHELL:
                mark = MARK.match(lines[i - 1].strip()) if i else None
                found.append(Block(path, i + 1, fence.group(1), mark.group(1) if mark else None,
                                   "\n".join(lines[i + 1:end])))
            i = end + 1
    return found


def commands(block: Block) -> list[list[str]]:
    """The block's commands as argv lists: continuation lines joined, comments dropped, split at ``;``, ``&&``,
    ``||`` and ``|``, redirections and their targets dropped; a here-document's body is no command."""
    out, heredoc = [], None
    for line in re.sub(r"\\\n", " ", block.text).splitlines():
        if heredoc:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if "<<" in line:
            heredoc = re.search(r"<<-?\s*['\"]?(\w+)", line).group(1)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        argv, skip = [], False
        for token in [*lexer, ";"]:
            if token in (";", "&&", "||", "|"):
                out += [argv] if argv else []
                argv = []
            elif token in (">", ">>", "<", "<<"):
                skip = True
            elif not skip:
                argv.append(token)
            else:
                skip = False
    return out


def vnetbench_argvs(block: Block) -> list[list[str]]:
    """The block's ``vnetbench`` commands (arguments only), but those with a ``...`` placeholder."""
    return [argv[1:] for argv in commands(block)
            if argv and Path(argv[0]).name == "vnetbench" and "..." not in argv]


def parse(argv: list[str]) -> None:
    """What the CLI checks before a command starts anything: its options, and a run's kernel and kernel options.
    Raises SystemExit (argparse) or vnetbench's UsageError."""
    from vnetbench import cli

    parser = cli.build_parser(cli.command_of(argv) or "")
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    if getattr(args, "help", False):
        return
    app = args.app and str(ROOT / args.app) if args.command in ("run", "sweep") else None
    if args.command == "run":
        from vnetbench import workloads

        workloads.chosen(app, args.kernel, extra, typed=args.kernel)
    elif args.command == "sweep":
        from vnetbench.engine import sweep

        sweep.settle(args.study, args.kernel, args.topologies, args.ranks, args.repeat, extra, app=app)


EXIT = re.compile(r"\(exit (\d+)\)\s*$")


def script(block: Block) -> str:
    """The block as bash runs it: as written, but a command whose comment, or a comment line right after it,
    ends in ``(exit N)`` must exit N (and goes on), as the docs write what a refused command does."""
    lines, out, i = block.text.splitlines(), [], 0
    while i < len(lines):
        command = [lines[i]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        notes = []
        while i + 1 < len(lines) and lines[i + 1].lstrip().startswith("#"):
            i += 1
            notes.append(lines[i])
        i += 1
        text = "\n".join(command)
        expected = next((m.group(1) for m in map(EXIT.search, [command[-1], *notes]) if m), None)
        if expected is None or text.lstrip().startswith("#"):
            out += [text, *notes]
            continue
        out.append(f"rc=0; bash -c {shlex.quote(text)} || rc=$?; [ \"$rc\" -eq {expected} ] || "
                   f"{{ echo \"{block.where}: expected exit {expected}, got $rc: \"{shlex.quote(text)} >&2; exit 1; }}")
    return "\n".join(out)


def run(block: Block, folder: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the block (``script``) with bash (-e -u -o pipefail) in ``folder``, where ``vnetbench`` and
    ``.venv/bin/vnetbench`` are this venv's; under the mark ``dry-run`` every ``vnetbench sweep`` gets
    ``--dry-run``."""
    real = Path(sys.executable).parent / "vnetbench"
    shim = folder / ".venv" / "bin" / "vnetbench"
    shim.parent.mkdir(parents=True, exist_ok=True)
    dry = 'if [ "$1" = sweep ]; then set -- "$@" --dry-run; fi\n' if block.mark == "dry-run" else ""
    shim.write_text(f"#!/bin/sh\n{dry}exec {shlex.quote(str(real))} \"$@\"\n")
    shim.chmod(0o755)
    (folder / "vnetbench-results").mkdir(exist_ok=True)
    for name in ("vnetbench-results/results.jsonl", *SEEDED):
        shutil.copyfile(STUDY, folder / name)
    shutil.copyfile(HELLO, folder / "hello.c")
    for name in ("examples", "ansible"):  # the examples name the repository's files by relative paths
        if not (folder / name).exists():
            (folder / name).symlink_to(ROOT / name)
    env = dict(os.environ, PATH=os.pathsep.join([str(shim.parent), os.environ.get("PATH", "")]))
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script(block)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=timeout)


def marked(tier: str) -> list[Block]:
    return [block for block in blocks() if MARKS.get(block.mark or "") == tier]
