"""Reading the small text files users hand in (topology specs, inventories, hostfiles), bounded."""

from pathlib import Path

import yaml

from vnetbench.errors import SpecError

MAX_BYTES = 1 << 20
# deeper than any topology or inventory; PyYAML's composer recurses, and a few thousand '['
# would end in a RecursionError
MAX_DEPTH = 32
# Python refuses to read a decimal integer of more than 4300 digits (ValueError, not a YAML error)
MAX_DIGITS = 1000


def read_text(path: Path, label: str, what: str, limit: int = MAX_BYTES) -> str:
    """The whole file as text; SpecError '<label>: ...' when unreadable, over ``limit`` or not UTF-8."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise SpecError(f"{label}: cannot read: {exc.strerror}") from None
    if len(raw) > limit:
        raise SpecError(f"{label}: larger than {limit >> 20} MiB; not {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{label}: not UTF-8 text") from None


def read_yaml(text: str, label: str, what: str, *, aliases: bool = True, tree: bool = False):
    """``text`` read as YAML with the safe loader: its data, or (data, node tree) with ``tree``.

    SpecError '<label>:LINE: ...' (one line) when it is not valid YAML, nests deeper than
    MAX_DEPTH, holds a number too long to read or, unless ``aliases``, uses an alias.
    """
    try:
        _check_events(text, label, what, aliases)
        node = yaml.compose(text, Loader=yaml.SafeLoader) if tree else None
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise SpecError(f"{label}:{line}: not valid YAML: {one_line(exc.problem or exc.context)}") from None
    except yaml.reader.ReaderError as exc:
        line = text[:exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise SpecError(f"{label}:{line}: not valid YAML: control character U+{code:04X} is not allowed "
                        f"(write it as an escape inside double quotes)") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{label}: not valid YAML: {one_line(str(exc))}") from None
    except ValueError as exc:  # what _check_events does not foresee of Python's limits
        raise SpecError(f"{label}: not {what}: {one_line(str(exc))}") from None
    return (data, node) if tree else data


def _check_events(text: str, label: str, what: str, aliases: bool) -> None:
    # the event stream is produced without recursion, so it is safe to walk whatever the depth
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(f"{label}:{line}: nested more than {MAX_DEPTH} levels deep; not {what}")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent) and not aliases:
            # a few nested aliases make a document that takes forever to validate
            raise SpecError(f"{label}:{line}: aliases (*{event.anchor}) are not allowed in {what}; "
                            f"write the value out")
        elif isinstance(event, yaml.ScalarEvent) and event.implicit[0] and len(event.value) > MAX_DIGITS \
                and event.value.lstrip("+-").replace("_", "").isdigit():
            raise SpecError(f"{label}:{line}: a number of {len(event.value)} digits; not {what}")


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, for a one-line message."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.strip())
