"""One home for turning a user's YAML file into a validated model: every problem as ``FILE:LINE: field: what``.

Topology specs, hosts topologies, Slurm topologies and application definitions are all read here:
``read(path, ...)`` gives the parsed data and its line table (a field given twice is refused),
``validated(model, data, source, lines)`` makes the pydantic model or raises SpecError listing every
problem located, ``report`` locates problems found after validation the same way.
"""

from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from vnetbench.core.errors import SpecError

from . import units
from vnetbench.core.files import read_text, read_yaml


def read(path: Path, label: str, what: str, limit: int, kind: str | None = None) -> tuple[object, "Lines"]:
    """(data, lines) of the YAML file ``path``; SpecError naming ``label`` (unreadable, larger than ``limit``:
    "not WHAT"; not YAML, too deep: "not KIND"; a field given twice)."""
    text = read_text(path, label, what, limit)
    return parse(text, str(path), kind or what)


def parse(text: str, source: str, what: str) -> tuple[object, "Lines"]:
    """(data, lines) of YAML ``text`` read from ``source``; a field given twice is refused."""
    data, node = read_yaml(text, source, what, aliases=False, tree=True)
    lines = Lines(node)
    if lines.duplicates:
        loc, line = lines.duplicates[0]
        raise SpecError(f"{where(source, line, loc)}: given twice")
    return data, lines


def validated(model: type[BaseModel], data, source: str, lines=None):
    """``model`` made from ``data``, or SpecError listing every problem as FILE:LINE: field: what.
    Every spec model (this module's Topology, the hosts backend's) is validated here."""
    lines = lines or Lines(None)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # a misspelt field is one problem, not two: its "unknown" error says what was meant
        meant = {tuple(e["loc"][:-1]) + (_suggestion(e["loc"], model),) for e in errors
                 if e["type"] == "extra_forbidden"}
        problems = [(tuple(e["loc"]), _message(e, model)) for e in errors
                    if not (e["type"] == "missing" and tuple(e["loc"]) in meant)]
        raise SpecError(_report(source, lines, problems)) from None


def report(source: str, lines, problems: list[tuple[tuple, str]]) -> str:
    """Problems found after validation ((field path, what)) located as the model's own are."""
    return _report(source, lines or Lines(None), problems)


def _model_at(model: type[BaseModel], path: tuple) -> type[BaseModel] | None:
    """The model of the mapping at ``path`` (field names; list indexes left out) under ``model``."""
    import typing

    for name in path:
        field = model.model_fields.get(name)
        if field is None:
            return None
        candidates = [field.annotation]
        found = None
        while candidates:
            kind = candidates.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                found = kind
                break
            candidates += list(typing.get_args(kind))
        if found is None:
            return None
        model = found
    return model


def _message(err, model=None) -> str:
    kind, loc = err["type"], err["loc"]
    if kind == "missing":
        return "required, but missing"
    if kind == "extra_forbidden":
        close = _suggestion(loc, model)
        hint = f" (did you mean {close!r}?)" if close else ""
        return f"unknown field{hint}; allowed: {', '.join(_allowed(loc, model))}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping of fields, got {units.shown(err.get('input'))}"
    if kind == "list_type":
        return f"expected a list, got {units.shown(err.get('input'))}"
    if kind == "value_error":
        return str(err["ctx"]["error"])
    if kind == "invalid_key":
        return "field names must be text"
    return err["msg"]


def _allowed(loc, model=None) -> list[str]:
    model = _model_at(model, tuple(p for p in loc[:-1] if isinstance(p, str)))
    return list(model.model_fields) if model else []


def _suggestion(loc, model=None) -> str | None:
    import difflib

    close = difflib.get_close_matches(str(loc[-1]), _allowed(loc, model), n=1)
    return close[0] if close else None


def _path(loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def where(source: str, line: int | None, loc) -> str:
    place = f"{source}:{line}" if line else source
    return f"{place}: {_path(loc)}" if loc else place


def _report(source: str, lines, problems) -> str:
    located = sorted(((lines.find(loc) or 0, loc, msg) for loc, msg in problems), key=lambda p: p[0])
    shown = [f"{where(source, line, loc)}: {msg}" for line, loc, msg in located[:10]]
    if len(problems) > 10:
        shown.append(f"... and {len(problems) - 10} more")
    return "\n".join(shown)


class Lines:
    """Line numbers of the fields of a YAML document, from the composed node tree."""

    def __init__(self, node):
        self.node = node
        self.duplicates = []
        self._table = {}
        if node is not None:
            self._walk(node, ())

    def _walk(self, node, loc):
        self._table[loc] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else None
                if name in seen:
                    self.duplicates.append((loc + (name,), key.start_mark.line + 1))
                seen.add(name)
                self._walk(value, loc + (name,))
                self._table[loc + (name,)] = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._walk(item, loc + (i,))

    def find(self, loc) -> int | None:
        """The line of ``loc``, or of its nearest ancestor present in the file."""
        found = ()
        for part in loc:
            # a key YAML read as a number or a boolean is text in the node tree
            for key in (part, str(part).lower() if isinstance(part, bool) else str(part)):
                if found + (key,) in self._table:
                    found += (key,)
                    break
            else:
                break
        return self._table.get(found)

    def table(self) -> dict:
        return dict(self._table)
