"""Application patterns in bounded time (apps/patterns.py): RE2 reads them as Python's re does, the rest
run in a child process killed at the deadline, and a pattern no bound holds is refused at load."""

import random
import re
import time

import pytest

from vnetbench import apps
from vnetbench.apps import patterns
from vnetbench.core.errors import SpecError

pytestmark = pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")  # re's, on [[:alpha:]]
CATASTROPHIC_LINE = "a" * 40 + "!\n"


def python(pattern: str, text: str) -> tuple:
    """What vnetbench read with re before: search, and the first group of findall's first and last item."""
    items = [item[0] if isinstance(item, tuple) else item for item in re.findall(pattern, text, re.M)]
    return re.search(pattern, text, re.M) is not None, items[0] if items else None, items[-1] if items else None


def bounded(pattern: str, text: str, seconds: float = 10) -> tuple:
    deadline = time.monotonic() + seconds
    return (patterns.search(pattern, text, deadline), patterns.find(pattern, text, "first", deadline),
            patterns.find(pattern, text, "last", deadline))


@pytest.mark.parametrize("pattern", [
    r"Loop time of ([0-9.eE+-]+)", r"^\s*(\d+)\s+([\d.]+)$", r"x{,3}(y)", r"[[:alpha:]](.)", r"(?i)total (\w+)",
    r"(\S+)\Z", r"\A(\w+)", r"(a|ab)(c|bcd)(d*)", r"\b(\d+)\b", r"(?s)start(.*)end", r"(?a)(\w+)", r"(x)?y",
    r"(\d*)", r"(a+)+$", r"(?P<time>\d+) s", r"[^\n](\d)", r"(?m:^)(.)", r"(\d)(?:\.\d+)?",
])
@pytest.mark.parametrize("text", ["", "Loop time of 2.5 on 2 procs\nLoop time of 3.5 on 2 procs\n", "ab cd 12 3\n",
                                  "start\nxy y total Ok 1.5end\n\n", "abcd\x1c1 \x0b2\n", "  4  5.5\n 6 7\n"])
def test_re2_reads_every_pattern_as_python_re_did(pattern, text):
    assert patterns.compile(pattern).needs_deadline is None, pattern
    assert bounded(pattern, text) == python(pattern, text)


def test_random_patterns_read_alike_on_ascii_and_unicode_text():
    """A small run of the fuzzing that shaped the rules (thousands of patterns, none read otherwise)."""
    atoms = ["a", "b", "1", " ", r"\d", r"\w", r"\s", r"\S", r"\W", ".", "[ab]", "[^a]", r"\b", r"\B", "^", "$",
             r"\Z", r"[^\s\d]", "-"]
    rng = random.Random(20)

    def gen(depth=0):
        r = rng.random()
        if depth > 2 or r < 0.35:
            return rng.choice(atoms)
        if r < 0.55:
            return gen(depth + 1) + gen(depth + 1)
        if r < 0.7:
            return f"({gen(depth + 1)}|{gen(depth + 1)})"
        if r < 0.9:
            return f"({gen(depth + 1)}){rng.choice(['*', '+', '?', '{0,2}', '{2}', '*?', '+?', '??'])}"
        return f"({gen(depth + 1)})"

    compared = 0
    while compared < 300:
        pattern = ("(?i)" if rng.random() < 0.2 else "") + f"({gen()}){gen()}"
        compiled = patterns.compile(pattern)
        if compiled.needs_deadline:
            continue
        for alphabet in ("ab1 -\n_Ak", "ab1 \n\u00e9\u212a\u0663\u00a0"):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
            if compiled.engine(text, every_match=True)[0] == "re2":
                assert bounded(pattern, text) == python(pattern, text), (pattern, text)
                compared += 1
    assert compared == 300


@pytest.mark.parametrize("pattern, why", [
    (r"^(a|aa)+\1$", "a backreference"),
    (r"(?=(a+)+$)a", "a lookahead or lookbehind"),
    (r"(?<!x)(\d)", "a negative lookahead or lookbehind"),
    (r"(?>a+)(b)", "an atomic group"),
    (r"(a++)(b)", "a possessive repeat"),
    (r"(a)?(?(1)b|c)", "a conditional group"),
    (r"(?-m:$)(x)", "'$' without multiline"),
    (r"a{1001}(b)", "a repeat count above 1000"),
    (r"((a*)*)b", "a repeat of something that may match nothing"),
    (r"(?i)(\u0130)", "a non-ASCII letter under (?i)"),
])
def test_what_re2_cannot_mean_alike_is_named(pattern, why):
    assert why in patterns.compile(pattern).needs_deadline


def test_the_issues_nested_quantifier_runs_in_linear_time():
    started = time.monotonic()
    assert patterns.find(r"(a+)+$", CATASTROPHIC_LINE * 1000, "last") is None
    assert patterns.search(r"^(\w+\s?)+$", CATASTROPHIC_LINE * 1000 + "all done\n")
    assert time.monotonic() - started < 2


def test_a_backtracking_blow_up_is_killed_at_the_deadline():
    started = time.monotonic()
    with pytest.raises(patterns.Unfinished, match=r"gave up after ([\d.]+) s, .*backtracking re: a backreference") \
            as gave_up:
        patterns.find(r"^(a|aa)+\1$", CATASTROPHIC_LINE, "last", started + 1)
    assert time.monotonic() - started < 3
    # what was left of the second when the child started: a loaded machine takes some of it first
    assert 0 < float(re.search(r"after ([\d.]+) s", str(gave_up.value)).group(1)) <= 1
    with pytest.raises(patterns.Unfinished, match="not tried: no time left"):
        patterns.search(r"(?=(a+)+$)a", CATASTROPHIC_LINE, started)


def test_what_needs_re_still_answers_as_re_within_the_deadline():
    text = "x 1\ny 22\nx 333\n\u00e9 4\n"
    for pattern in (r"(?<=x )(\d+)", r"^(\w) \d+$", r"(\d)\1"):  # lookbehind; Unicode \w on non-ASCII; backref
        assert bounded(pattern, text) == python(pattern, text)
    assert bounded(r"(\B)", "") == python(r"(\B)", "")  # re never finds \B in an empty text; RE2 would


def test_unicode_dependent_patterns_take_re_on_unicode_text_only():
    compiled = patterns.compile(r"(\w+)")
    assert compiled.ascii_only
    assert compiled.engine("abc", every_match=True)[0] == "re2"
    assert compiled.engine("\u00e9t\u00e9", every_match=True)[0] == "re"
    assert patterns.compile(r"(?a)(\w+)").engine("\u00e9t\u00e9", every_match=True)[0] == "re2"
    assert patterns.compile(r"t(.)").engine("\ud800 t", every_match=False)[0] == "re"  # a lone surrogate


def _app(tmp_path, text):
    path = tmp_path / "app.yaml"
    path.write_text(text)
    return path


def test_a_pattern_no_bound_holds_is_refused_at_load_naming_it(tmp_path):
    path = _app(tmp_path, "name: x\ncommand: [sh]\nmetrics:\n  - {name: fast, regex: '(a+)+$'}\n"
                          "  - {name: pairs, regex: '^(a|aa)+\\1$'}\n")
    with pytest.raises(SpecError) as caught:
        apps.load_app(path)
    assert str(caught.value).startswith(f"{path}:5: metrics[1].regex: metric 'pairs' has a backreference, which "
                                        "RE2 cannot run in linear time")
    assert caught.value.exit_code == 2 and "timeout: SECONDS" in str(caught.value)
    path = _app(tmp_path, "name: x\ncommand: [sh]\nsuccess: '(?<=done) ok'\n")
    with pytest.raises(SpecError, match=r"app.yaml:3: success: the success pattern has a lookahead or lookbehind"):
        apps.load_app(path)
    # with a timeout the same patterns load: the deadline bounds them
    apps.load_app(_app(tmp_path, "name: x\ncommand: [sh]\ntimeout: 5\nsuccess: '(?<=done) ok'\n"))
