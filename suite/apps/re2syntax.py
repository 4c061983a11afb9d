"""A pattern as Python's ``re`` parses it, written out in RE2's syntax with the same meaning, or the reasons
it cannot be (what RE2 has not, or has with another meaning). Used by patterns.py.

Nothing is written as RE2 would read Python's text: every construct comes from Python's own parse tree,
so ``x{,3}``, ``[[:alpha:]]`` or ``\\s`` mean here what they mean to ``re``. What RE2 means alike on ASCII text
only (``\\d \\w \\s \\b`` without ``(?a)``, anything under ``(?i)``) is noted, for the caller to choose by text.
"""

import re
from dataclasses import dataclass, field
from re import _constants as sre  # the parser's opcodes
from re import _parser

RE2_REPEAT = 1000  # the largest {n,m} RE2 takes
TOP = 0x10FFFF
DIGIT = [(0x30, 0x39)]
WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# \s: on ASCII text, Python's Unicode \s also takes the separators \x1c-\x1f; (?a)\s does not
SPACE = {False: [(0x09, 0x0D), (0x1C, 0x20)], True: [(0x09, 0x0D), (0x20, 0x20)]}


def _merge(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _complement(ranges):
    out, at = [], 0
    for lo, hi in _merge(ranges):
        if lo > at:
            out.append((at, lo - 1))
        at = hi + 1
    return out + ([(at, TOP)] if at <= TOP else [])


def _char(c: int) -> str:
    return chr(c) if chr(c).isascii() and chr(c).isalnum() else f"\\x{{{c:X}}}"


@dataclass
class Written:
    """A pattern in RE2's syntax (``text``), or ``cannot`` say why not, with what the caller must know."""

    text: str = ""
    cannot: list[str] = field(default_factory=list)  # constructs RE2 has not, or has with another meaning
    ascii_only: bool = False  # RE2 means the same on ASCII text only
    prefers_empty: bool = False  # a lazy repeat, or an alternative before the last that may be empty
    nonboundary: bool = False  # \B, which re never finds in an empty text
    min_width: int = 0  # of a match


def write(pattern: str, flags: int) -> Written:
    """``pattern`` (valid for ``re.compile(pattern, flags)``) in RE2's syntax, or the reasons it cannot be."""
    writer = _Writer()
    try:
        parsed = _parser.parse(pattern, flags)
        writer.out.text = writer.sequence(parsed, parsed.state.flags)
        writer.out.min_width = parsed.getwidth()[0]
    except (AttributeError, TypeError, ValueError) as exc:  # a parse tree this module does not know
        writer.no(f"a construct not translated ({type(exc).__name__})")
    return writer.out


class _Writer:
    def __init__(self):
        self.out = Written()

    def no(self, why: str) -> str:
        if why not in self.out.cannot:
            self.out.cannot.append(why)
        return ""

    def sequence(self, items, flags: int) -> str:
        return "".join(self.item(op, av, flags) for op, av in items)

    def item(self, op, av, flags: int) -> str:
        caseless = flags & re.I
        if caseless:
            self.out.ascii_only = True
        if op is sre.LITERAL:
            if caseless and av > 0x7F:
                return self.no("a non-ASCII letter under (?i)")
            return f"(?i:{_char(av)})" if caseless else _char(av)
        if op is sre.NOT_LITERAL:
            return self.item(sre.IN, [(sre.NEGATE, None), (sre.LITERAL, av)], flags)
        if op is sre.ANY:
            return "(?s:.)" if flags & re.S else "[^\\n]"
        if op is sre.IN:
            return self.charset(av, flags)
        if op is sre.BRANCH:
            alternatives = av[1]
            if any(alt.getwidth()[0] == 0 for alt in alternatives[:-1]):
                self.out.prefers_empty = True
            return "(?:" + "|".join(self.sequence(alt, flags) for alt in alternatives) + ")"
        if op is sre.SUBPATTERN:
            group, add, drop, body = av
            inner = self.sequence(body, (flags | add) & ~drop)
            return f"({inner})" if group is not None else f"(?:{inner})"
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, body = av
            if low > RE2_REPEAT or (high is not sre.MAXREPEAT and high > RE2_REPEAT):
                return self.no(f"a repeat count above {RE2_REPEAT}")
            if body.getwidth()[0] == 0 and high != 1:
                # an iteration that matches nothing ends re's loop, not RE2's: (\w?|.)+ reads "a -a" two ways
                return self.no("a repeat of something that may match nothing")
            lazy = "?" if op is sre.MIN_REPEAT else ""
            self.out.prefers_empty |= bool(lazy)
            if high is sre.MAXREPEAT:
                count = {0: "*", 1: "+"}.get(low, f"{{{low},}}")
            else:
                count = "?" if (low, high) == (0, 1) else f"{{{low}}}" if low == high else f"{{{low},{high}}}"
            return f"(?:{self.sequence(body, flags)}){count}{lazy}"
        if op is sre.AT:
            return self.at(av, flags)
        return self.no({sre.GROUPREF: "a backreference", sre.GROUPREF_EXISTS: "a conditional group",
                        sre.ASSERT: "a lookahead or lookbehind", sre.ASSERT_NOT: "a negative lookahead or lookbehind",
                        sre.POSSESSIVE_REPEAT: "a possessive repeat",
                        sre.ATOMIC_GROUP: "an atomic group"}.get(op, f"{str(op).lower()}"))

    def at(self, where, flags: int) -> str:
        if where is sre.AT_BEGINNING:
            return "(?m:^)" if flags & re.M else "\\A"
        if where is sre.AT_BEGINNING_STRING:
            return "\\A"
        if where is sre.AT_END:
            return "(?m:$)" if flags & re.M else self.no("'$' without multiline (before a last newline)")
        if where is sre.AT_END_STRING:
            return "\\z"
        if where in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY):
            self.out.ascii_only |= not flags & re.A  # RE2's word boundaries are ASCII's
            self.out.nonboundary |= where is sre.AT_NON_BOUNDARY
            return "\\b" if where is sre.AT_BOUNDARY else "\\B"
        return self.no(str(where).lower())

    def charset(self, members, flags: int) -> str:
        caseless, negate, ranges = flags & re.I, False, []
        for op, av in members:
            if op is sre.NEGATE:
                negate = True
            elif op is sre.LITERAL:
                ranges.append((av, av))
            elif op is sre.RANGE:
                ranges.append(av)
            elif op is sre.CATEGORY:
                name = str(av)
                base = DIGIT if "DIGIT" in name else WORD if "WORD" in name else SPACE[bool(flags & re.A)]
                self.out.ascii_only |= not flags & re.A
                if "NOT" in name:
                    if caseless and base is WORD:  # (?i) would fold the Kelvin sign of \W's back into k
                        return self.no("\\W under (?i)")
                    base = _complement(base)
                ranges += base
            else:
                return self.no(str(op).lower())
        if caseless and any(max(av if op is sre.LITERAL else av[1], 0) > 0x7F for op, av in members
                            if op in (sre.LITERAL, sre.RANGE)):
            return self.no("a non-ASCII letter under (?i)")
        # surrogates never reach RE2 (text holding them goes to re), and UTF-8 cannot carry them
        ranges = _complement(_complement(ranges) + [(0xD800, 0xDFFF)])
        if not ranges:
            return "[^\\x00-\\x{10FFFF}]" if not negate else "(?s:.)"
        body = "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges)
        text = f"[{'^' if negate else ''}{body}]"
        return f"(?i:{text})" if caseless else text
