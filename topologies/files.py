"""Reading the small text files users hand in (topology specs, inventories, hostfiles), bounded."""

from pathlib import Path

from vnetbench.errors import SpecError

MAX_BYTES = 1 << 20


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
