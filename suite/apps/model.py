"""The application definition: a YAML file naming an MPI program, how to judge and read its output.

Validated like a topology: every problem names the file, the line and the field
(``app.yaml:4: metrics[0].regex: ...``), misspelt fields are errors, and nothing starts on a bad
file. Relative paths in ``command`` resolve against the YAML's folder. A pattern that RE2 cannot run
in linear time is bounded by the app's timeout (patterns.py): without ``timeout:`` it is refused.
"""

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, field_validator

from vnetbench.core.errors import SpecError, UsageError
from vnetbench.core.files import one_line, read_text, read_yaml
from vnetbench.topologies.model.validation import Lines, report, validated, where

from . import patterns

MAX_APP_BYTES = 64 << 10
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,62}$")


def _regex(value):
    if not isinstance(value, str) or not value:
        raise ValueError("expected a regular expression (text)")
    try:
        patterns.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


def _metric_regex(value):
    pattern = _regex(value)
    if patterns.compile(pattern).python.groups < 1:
        raise ValueError("needs a group around the number, e.g. 'Loop time of ([0-9.eE+-]+)'")
    return pattern


def _name(value):
    if not isinstance(value, str) or not NAME.match(value):
        raise ValueError("expected a name of letters, digits, '.', '_' or '-', starting with a letter "
                         "(at most 63 characters)")
    return value


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class RegexMetric(_Spec):
    """A number read from the output: the first group of the ``match`` (last by default) match."""

    name: Annotated[str, PlainValidator(_name)]
    regex: Annotated[str, PlainValidator(_metric_regex)]
    unit: str = ""
    better: Literal["lower", "higher"] | None = None
    match: Literal["first", "last"] = "last"
    scaling: bool = False


class AppDef(_Spec):
    name: Annotated[str, PlainValidator(_name)]
    command: list[str] = Field(min_length=1)
    env: dict[str, str] = {}
    timeout: float | None = Field(default=None, gt=0)
    parser: str | None = None
    success: Annotated[str, PlainValidator(_regex)] | None = None
    metrics: list[RegexMetric] = []

    @field_validator("parser")
    @classmethod
    def _known_parser(cls, value):
        from . import parsers

        if value is not None and value not in parsers.PARSERS:
            raise ValueError(f"unknown parser {value!r}; allowed: {', '.join(parsers.PARSERS)}")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value):
        for key in value:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise ValueError(f"{key!r} is not an environment variable name")
        return value

    @field_validator("metrics")
    @classmethod
    def _unique(cls, value):
        names = [metric.name for metric in value]
        twice = sorted({name for name in names if names.count(name) > 1} | ({"elapsed_s"} & set(names)))
        if twice:
            raise ValueError(f"metric {twice[0]!r} is declared twice (elapsed_s is always recorded)")
        return value


class App:
    """A loaded definition: the validated fields, where it came from, its program resolved."""

    def __init__(self, spec: AppDef, source: Path):
        self.spec, self.source = spec, source
        self.name = spec.name

    @property
    def folder(self) -> Path:
        return self.source.parent

    def argv(self) -> list[str]:
        """The command with the program found and paths beside the YAML made absolute."""
        return [self.program(), *(str(self._beside(arg) or arg) for arg in self.spec.command[1:])]

    def _beside(self, arg: str) -> Path | None:
        # an argument that names something existing beside the YAML (in.lj, inputs/data.lj) is read from
        # there; anything else (an option, an output path, a shell command line) goes to the program as written
        if not arg or Path(arg).is_absolute() or arg.startswith("-") or "\0" in arg:
            return None
        beside = self.folder / arg
        try:
            return beside if beside.exists() else None
        except OSError:  # a name too long to be a path: text for the program
            return None

    def program(self) -> str:
        first = self.spec.command[0]
        if "/" in first:
            path = Path(first) if Path(first).is_absolute() else self.folder / first
            # absolute, but not through symlinks: a venv's bin/python is a symlink, and the interpreter
            # it points to, started by its own path, is not in the venv (no mpi4py there)
            return os.path.abspath(path)
        return shutil.which(first) or first

    def definition_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.spec.model_dump(), sort_keys=True).encode()).hexdigest()[:16]

    def program_hash(self) -> str | None:
        try:
            with open(self.program(), "rb") as handle:
                return hashlib.file_digest(handle, "sha256").hexdigest()[:16]
        except OSError:
            return None

    def check_startable(self) -> None:
        """UsageError (exit 2, nothing started) for a program that is not there or an input beside the YAML
        that cannot be read. Other arguments are not judged: which are outputs only the program knows."""
        program = Path(self.program())
        if not program.is_file():
            raise UsageError(f"{self.source}: command[0]: program {self.spec.command[0]!r} not found"
                             + ("" if "/" in self.spec.command[0] else " on PATH"))
        if not program.stat().st_mode & 0o111:
            raise UsageError(f"{self.source}: command[0]: {program} is not executable")
        for i, raw in enumerate(self.spec.command[1:], start=1):
            path = self._beside(raw)
            if path is None or path.is_dir():
                continue  # not an input beside the YAML (an option, an output, a folder): nothing to read
            try:
                # opened without blocking and not read: a FIFO input with no writer must not hang the check
                os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            except OSError as exc:
                raise UsageError(f"{self.source}: command[{i}]: {raw!r}: cannot read: {exc.strerror}") from None

    def declaration(self) -> dict:
        """What a record carries so that report works without the YAML: the metric declarations."""
        return {"parser": self.spec.parser, "metrics": [m.model_dump() for m in self.spec.metrics]}


def _one_line(exc: SpecError) -> SpecError:
    """The shared validator's report cut to its first problem (in file order) and a count of the rest."""
    first, *rest = str(exc).splitlines()
    more = f" (and {len(rest)} more problem(s))" if rest else ""
    return SpecError(one_line(f"{first}{more}"))


def load_app(path: str | Path) -> App:
    """The definition in ``path``; SpecError (exit 2) naming file, line and field for anything wrong."""
    path = Path(path)
    text = read_text(path, f"--app {path}", "an application definition", MAX_APP_BYTES)
    data, node = read_yaml(text, str(path), "an application definition", aliases=False, tree=True)
    lines = Lines(node)
    if lines.duplicates:
        loc, line = lines.duplicates[0]
        raise SpecError(f"{where(str(path), line, loc)}: given twice")
    if not isinstance(data, dict):
        raise SpecError(f"{path}:1: expected a mapping of fields (name, command, ...)")
    try:
        spec = validated(AppDef, data, str(path), lines)
    except SpecError as exc:
        raise _one_line(exc) from None
    from vnetbench import kernels

    unbounded = _unbounded(spec)
    if unbounded:
        raise SpecError(one_line(report(str(path), lines, unbounded[:1])))
    if spec.name in kernels.names():
        raise SpecError(f"{where(str(path), lines.find(('name',)), ('name',))}: {spec.name!r} is a kernel's "
                        f"name; choose another")
    return App(spec, path.resolve())


def _unbounded(spec: AppDef) -> list[tuple[tuple, str]]:
    """The patterns no bound holds: RE2 cannot run them, and without a timeout there is no deadline."""
    if spec.timeout is not None:
        return []
    found = [(("success",), "the success pattern", spec.success)] if spec.success else []
    found += [(("metrics", i, "regex"), f"metric {m.name!r}", m.regex) for i, m in enumerate(spec.metrics)]
    return [(loc, f"{what} has {why}, which RE2 cannot run in linear time, and Python's re is run only within "
                  f"the app's timeout: add 'timeout: SECONDS' or write the pattern without it")
            for loc, what, pattern in found if (why := patterns.compile(pattern).needs_deadline)]


def adhoc(program: list[str], parser: str | None = None) -> App:
    """The definition ``exec --record`` runs under: the program as given, its name as the app's."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(program[0]).name) or "program"
    name = name if name[:1].isalpha() else f"app_{name}"
    try:
        spec = validated(AppDef, {"name": name[:63], "command": list(program), "parser": parser}, "exec")
    except SpecError as exc:
        raise UsageError(f"--parser: {str(exc).splitlines()[0].split(': ', 2)[-1]}") from None
    return App(spec, Path.cwd() / "exec")
