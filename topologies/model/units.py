"""The scalar types of a topology spec: safe names, memory sizes, link rates and delays.

Each ``parse_*`` takes what YAML gave and returns a canonical value, or raises ValueError with
a phrase saying what was expected; each ``format_*`` turns the value back into text that the
parser accepts, so a spec survives ``to_dict`` -> YAML -> load unchanged.
"""

import re

# Names end up in interface, namespace, cgroup and host names (TOPOLOGY-VM: at most 57
# characters, within a DNS label's 63): a DNS label, lower case, short. \Z, not $: $ also
# matches before a final newline, and "a\n" must not pass.
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,22}[a-z0-9])?\Z")
TOPOLOGY_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?\Z")
# how ranks fill VMs or hosts: consecutive ranks together, or dealt out one at a time (every backend)
PLACEMENTS = ("block", "round-robin")

# numbers and units, blanks allowed between them but no other white space (a newline would
# break the one-line message that echoes the value)
_SIZE_RE = re.compile(r"^ *(\d+(?:\.\d+)?) *([kmgt]?)(i?b?) *\Z", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MIN_MEMORY = 64 << 20
MAX_MEMORY = 1 << 50       # 1024 TiB: beyond any host, and far from a float's overflow

# tc's rate units: bit-based are decimal bits/s, bps-based are decimal bytes/s
_RATE_RE = re.compile(r"^ *(\d+(?:\.\d+)?) *([kmgt]?)(bit|bps) *\Z", re.IGNORECASE)
_RATE_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
MIN_RATE = 10**5           # 100 kbit: below this tbf needs more care than a benchmark is worth
MAX_RATE = 100 * 10**9     # 100 gbit

_DELAY_RE = re.compile(r"^ *(\d+(?:\.\d+)?) *(us|ms|s) *\Z", re.IGNORECASE)
_DELAY_SCALE = {"us": 1, "ms": 1000, "s": 1_000_000}
MAX_DELAY_US = 10_000_000


def check_name(value, pattern=NAME_RE, longest: int = 24) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a name (text), got {shown(value)}")
    if not pattern.match(value):
        raise ValueError(f"{quoted(value)} is not a valid name: use 1 to {longest} lower-case letters, digits "
                         f"and '-', starting and ending with a letter or digit")
    return value


def parse_size(value) -> int:
    """'12GB', '512MiB', '6g' -> bytes (K, M, G, T are powers of 1024, as for VM memory)."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected a size with a unit such as 6GB or 512MB, got {shown(value)}")
    match = _SIZE_RE.match(value)
    if not match or (match.group(3) and not match.group(2) and match.group(3).lower() == "i"):
        raise ValueError(f"{quoted(value)} is not a size; expected a number and a unit such as 6GB or 512MB")
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit:
        raise ValueError(f"{quoted(value)} has no unit; expected a size such as 6GB or 512MB")
    size = number * _SIZE_UNITS[unit]
    if size < MIN_MEMORY:
        raise ValueError(f"{value} is too small; allowed: at least 64MB")
    if size > MAX_MEMORY:  # also what a number of 400 digits becomes: infinity
        raise ValueError(f"{quoted(value, False)} is out of range; allowed: 64MB to 1024TB")
    return int(size)


def format_size(size: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def human_size(size: int) -> str:
    """For people: '5.7 GiB'."""
    if size >= 1 << 40:
        return f"{size / (1 << 40):.1f} TiB"
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.0f} MiB"


def parse_rate(value) -> int:
    """'1gbit', '100mbit', '125MBps' -> bits per second (tc's units)."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected a rate such as 1gbit or 100mbit, got {shown(value)}")
    match = _RATE_RE.match(value)
    if not match:
        raise ValueError(f"{quoted(value)} is not a rate; expected a number and a unit such as 1gbit or 100mbit")
    number, prefix, base = float(match.group(1)), match.group(2).lower(), match.group(3).lower()
    rate = number * _RATE_SCALE[prefix] * (8 if base == "bps" else 1)
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ValueError(f"{quoted(value, False)} is out of range; allowed: 100kbit to 100gbit")
    return int(rate)


def format_rate(rate: int) -> str:
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if rate % scale == 0:
            return f"{rate // scale}{unit}"
    return f"{rate}bit"


def parse_delay(value) -> int:
    """'10ms', '250us', '0.5s' -> microseconds."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected a delay such as 1ms or 200us, got {shown(value)}")
    match = _DELAY_RE.match(value)
    if not match:
        raise ValueError(f"{quoted(value)} is not a delay; expected a number and us, ms or s, such as 1ms")
    delay = float(match.group(1)) * _DELAY_SCALE[match.group(2).lower()]
    if not delay <= MAX_DELAY_US or round(delay) < 1:  # in that order: round(infinity) raises
        raise ValueError(f"{quoted(value, False)} is out of range; allowed: 1us to 10s")
    return int(round(delay))


def format_delay(delay_us: int) -> str:
    if delay_us % 1000 == 0:
        return f"{delay_us // 1000}ms"
    return f"{delay_us}us"


def shown(value) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return f"the number {quoted(value, False)}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return quoted(value)


def quoted(value, quote: bool = True, longest: int = 40) -> str:
    """``value`` for a one-line message: repr (control characters escaped), cut short when long."""
    text = repr(value) if quote else str(value)
    if len(text) <= longest:
        return text
    return f"{text[:longest - 4]}...{text[-1] if quote else ''} ({len(str(value))} characters)"
