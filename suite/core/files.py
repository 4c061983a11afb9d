"""Reading the files users hand in, bounded: small text files whole (topology specs, inventories,
hostfiles), line files (stores, records to ingest, application output) a bounded line at a time."""

import os
import stat
from pathlib import Path


from vnetbench.core.errors import SpecError

MAX_BYTES = 1 << 20
# deeper than any topology or inventory; PyYAML's composer recurses, and a few thousand '['
# would end in a RecursionError
MAX_DEPTH = 32
# Python refuses to read a decimal integer of more than 4300 digits (ValueError, not a YAML error)
MAX_DIGITS = 1000


def read_text(path: Path, label: str, what: str, limit: int = MAX_BYTES) -> str:
    """The whole file as text; SpecError '<label>: ...' when unreadable, over ``limit`` or not UTF-8."""
    try:
        with open_regular(path, label, SpecError) as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise SpecError(f"{label}: cannot read: {exc.strerror}") from None
    if len(raw) > limit:
        raise SpecError(f"{label}: larger than {limit >> 20} MiB; not {what}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{label}: not UTF-8 text") from None


# a record of the largest sweep point is tens of KiB; a line this long is damage, not data
MAX_LINE = 4 << 20


def open_regular(path, label: str, error=SpecError):
    """``path`` opened for binary reading; ``error('<label>: ...')`` unless it is a regular file.

    Opened without blocking, so a FIFO with no writer is refused rather than waited on, and a
    device or directory never reaches read() (/dev/zero would be read until memory runs out).
    """
    it = "it" if str(path) in label else str(path)  # the label may name the file already
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{label}: {it} does not exist") from None
    except IsADirectoryError:
        raise error(f"{label}: {it} is a directory; a regular file is expected") from None
    except OSError as exc:
        raise error(f"{label}: cannot read {it}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
                stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}.get(stat.S_IFMT(mode), "not a file")
        raise error(f"{label}: {it} is {kind}; a regular file is expected")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def bounded_lines(handle, limit: int = MAX_LINE):
    """(number, bytes or None) for each line of the binary ``handle``, with its newline (the last
    may lack one); None for a line longer than ``limit``, skipped through, never held whole."""
    number = 0
    while True:
        line = handle.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) <= limit or line.endswith(b"\n"):
            yield number, line
            continue
        while line and not line.endswith(b"\n"):  # skip the rest of the overlong line
            line = handle.readline(1 << 20)
        yield number, None


def read_yaml(text: str, label: str, what: str, *, aliases: bool = True, tree: bool = False):
    """``text`` read as YAML with the safe loader: its data, or (data, node tree) with ``tree``.

    SpecError '<label>:LINE: ...' (one line) when it is not valid YAML, nests deeper than
    MAX_DEPTH, holds a number too long to read or, unless ``aliases``, uses an alias.
    """
    import yaml  # here: a run on a preset reads no YAML, and importing it costs every run ~12 ms

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
    import yaml

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


def read_json_files(folder, names, limit: int, key: str) -> list[dict]:
    """The JSON objects in ``folder``'s files ``names`` (a job's ranks or processes wrote them), each read up to
    ``limit`` bytes, those holding an int ``key``; an unreadable, malformed or non-regular file (a FIFO or device
    the writers chose to leave there is refused, not waited on) is left out."""
    import json

    out = []
    for name in names:
        try:
            with open_regular(Path(folder) / name, name) as handle:
                seen = json.loads(handle.read(limit))
        except (OSError, ValueError, SpecError):
            continue
        if isinstance(seen, dict) and isinstance(seen.get(key), int):
            out.append(seen)
    return out

