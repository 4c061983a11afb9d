"""An application's metric and success patterns, matched in bounded time and read as Python's ``re`` reads them.

Patterns have always meant what ``re.search(pattern, output, re.M)`` and ``re.findall(...)`` make of them,
and still do. What runs them:

- RE2 (google-re2), linear in the output, for every pattern it can run with Python's meaning. The pattern
  is parsed by Python's own parser and written out again in RE2's syntax (re2syntax.py), so no construct
  is read two ways (``{,3}``, ``[[:alpha:]]``, ``\\s``...). Unicode-dependent parts (``\\d \\w \\s \\b``
  without ``(?a)``, ``(?i)``) have Python's meaning on ASCII text; on other text their pattern goes the
  second way.
- Python's ``re`` in a child process killed at a deadline, for the rest (backreferences, lookaround,
  atomic groups, possessive repeats, conditionals, ``$`` without multiline, repeats above RE2's 1000).

``compile(pattern).needs_deadline`` says, before anything runs, why a pattern needs the second way
(None when RE2 runs it): a definition without a timeout has no deadline to give, and is refused.
"""

import json
import re
import subprocess
import sys
import time
import warnings
from functools import lru_cache

from . import re2syntax

FLAGS = re.M  # ^ and $ at every line, as application patterns have always been read
UNTIMED_SECONDS = 60.0  # the deadline of a run with no timeout (only Unicode text reaches ``re`` then)
CHILD_MEMORY = 1 << 30  # address space of the child running ``re``: a runaway backtrack stops there


class Unfinished(Exception):
    """A pattern that did not finish within its deadline (or its memory); the message says which bound."""


class Pattern:
    """A pattern as both engines take it; ``needs_deadline`` None when RE2 runs it on every text."""

    def __init__(self, text: str):
        self.text = text
        with warnings.catch_warnings():  # "possible nested set" and kin: the definition's check says so once
            warnings.simplefilter("ignore")
            self.python = re.compile(text, FLAGS)  # re.error for a pattern Python's re does not take
        written = re2syntax.write(text, FLAGS)
        self.re2 = None if written.cannot else self._re2(written)
        self.needs_deadline = "; ".join(written.cannot) or None
        ok = self.needs_deadline is None
        self.ascii_only, self.nonboundary = ok and written.ascii_only, ok and written.nonboundary
        # after an empty match, re looks for a longer one at the same place, RE2 only for the first: the two
        # iterate alike when no non-empty match ranks below an empty one (tests/unit/test_patterns.py fuzzes it)
        self.iterates = ok and (written.min_width > 0 or not written.prefers_empty)

    def _re2(self, written):
        try:
            import re2
        except ImportError:  # a dependency (setup.cfg); without it every pattern is bounded by a deadline
            written.cannot.append("no RE2 to run it (google-re2 is not installed)")
            return None
        options = re2.Options()
        options.log_errors = False
        try:
            compiled = re2.compile(written.text, options)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            written.cannot.append(f"what RE2 refuses ({reason})")
            return None
        if compiled.groups != self.python.groups:
            written.cannot.append("groups RE2 counts otherwise")
            return None
        return compiled

    def engine(self, text: str, every_match: bool) -> tuple[str, bytes | None]:
        """("re2", the text as UTF-8) when RE2 reads ``text`` as Python does, else ("re", None)."""
        if self.needs_deadline is not None or (every_match and not self.iterates) or (self.nonboundary and not text):
            return "re", None
        if text.isascii():
            return "re2", text.encode("ascii")
        if self.ascii_only:
            return "re", None
        try:
            return "re2", text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: RE2 reads UTF-8 only
            return "re", None


@lru_cache(maxsize=256)
def compile(pattern: str) -> Pattern:  # noqa: A001 (re's name for it)
    """The pattern, parsed and translated once; re.error when Python's re does not take it."""
    return Pattern(pattern)


def search(pattern: str, text: str, deadline: float | None = None) -> bool:
    """Whether ``re.search(pattern, text, re.M)`` finds anything; Unfinished past ``deadline`` (monotonic)."""
    compiled = compile(pattern)
    engine, data = compiled.engine(text, every_match=False)
    if engine == "re2":
        return compiled.re2.search(data) is not None
    return _in_child(compiled, "search", text, deadline)


def find(pattern: str, text: str, match: str = "last", deadline: float | None = None) -> str | None:
    """The first group of the first or last item of ``re.findall(pattern, text, re.M)`` ('' where the group
    took no part), None when nothing matched; Unfinished past ``deadline`` (a ``time.monotonic()`` value)."""
    compiled = compile(pattern)
    engine, data = compiled.engine(text, every_match=match == "last")
    if engine == "re":
        return _in_child(compiled, match, text, deadline)
    found = compiled.re2.search(data)
    if match == "last":
        found = _last(compiled.re2, data, found)
    if found is None:
        return None
    group = found.group(1)
    return "" if group is None else group.decode("utf-8")


def _last(regex, data: bytes, found):
    # findall's walk: on from the end of each match; after an empty one, on from the next character
    end = len(data)
    while found is not None:
        start, stop = found.span()
        if start < stop:
            pos = stop
        elif stop >= end:
            break
        else:
            lead = data[stop]
            pos = stop + (1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4)
        following = regex.search(data, pos)
        if following is None:
            break
        found = following
    return found


# the child: reads {"pattern", "flags", "op", "memory"} and the text (UTF-8) on stdin, writes its answer as JSON
CHILD = """\
import json, re, resource, sys
head = json.loads(sys.stdin.buffer.readline())
resource.setrlimit(resource.RLIMIT_AS, (head["memory"], head["memory"]))
text = sys.stdin.buffer.read().decode("utf-8", "surrogatepass")
compiled = re.compile(head["pattern"], head["flags"])
if head["op"] == "search":
    answer = compiled.search(text) is not None
else:
    answer = None
    for found in compiled.finditer(text):
        answer = found.group(1) or ""
        if head["op"] == "first":
            break
sys.stdout.write(json.dumps(answer))
"""


def _in_child(compiled: Pattern, op: str, text: str, deadline: float | None):
    """``re`` in a child process (isolated: no site, no vnetbench), killed at ``deadline``."""
    now = time.monotonic()
    bound = "the time left of the run's timeout" if deadline is not None else "the bound of a run without a timeout"
    if deadline is None:
        deadline = now + UNTIMED_SECONDS
    budget = deadline - now
    why = compiled.needs_deadline or "non-ASCII output, which RE2 reads otherwise"
    if budget <= 0:
        raise Unfinished(f"not tried: no time left of the run's timeout (it needs Python's re: {why})")
    head = json.dumps({"pattern": compiled.text, "flags": FLAGS, "op": op, "memory": CHILD_MEMORY})
    payload = head.encode() + b"\n" + text.encode("utf-8", "surrogatepass")
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(payload, timeout=budget)
    except subprocess.TimeoutExpired:
        raise Unfinished(f"gave up after {budget:.3g} s, {bound} (it needs Python's backtracking re: {why})") from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode != 0:
        last = (err.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        if "MemoryError" in last:
            raise Unfinished(f"ran out of its {CHILD_MEMORY >> 20} MiB of memory (it needs Python's "
                             f"backtracking re: {why})")
        raise Unfinished(f"the process matching it failed: {last}")
    return json.loads(out)
