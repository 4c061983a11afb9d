"""A program's output is read with a bound: a line longer than the limit is not read whole (the record names
it by number), an output beyond the cap is passed on but only its start and end are kept, so vnetbench's own
memory stays small whatever the program prints; what is kept is still read for the metrics."""

import json
import sys
from pathlib import Path

import pytest

from apps.conftest import app_file, leftovers
from conftest import requires_mpi, vnetbench
from vnetbench.apps.output import HEAD_LIMIT, TAIL_CHARS, TAIL_LIMIT
from vnetbench.core.files import MAX_LINE

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from store_memory import own_peak  # noqa: E402

pytestmark = [requires_mpi, pytest.mark.timeout(240)]

# characters in one line, just over the limit: mpirun's own forwarding of one long line takes time that grows
# with its square (a 16 MiB line: 70 s here)
HUGE_LINE = MAX_LINE + (1 << 20)
# characters of ordinary lines after it: beyond HEAD_LIMIT + TAIL_LIMIT (20 MiB), and far enough that doubling it
# would cost more than the test's 10 MiB of memory if the reader kept what it should not
FILLER = 24 << 20

PROGRAM = """
import sys
out, filler, huge = sys.stdout, int(sys.argv[1]), int(sys.argv[2])
out.write("first 1.5\\n")
for _ in range(huge // (1 << 20)):  # one line, written a MiB at a time
    out.write("x" * (1 << 20))
out.write("\\n")
line = "filler " + "y" * 92 + "\\n"
for _ in range(filler // len(line)):
    out.write(line)
out.write("result 42.0\\n")
"""


def chatty_run(tmp_path, filler: int, huge: int) -> tuple[float, dict]:
    """(peak resident MiB of ``run --app``, its record) for the program printing a line of ``huge`` characters
    (none when 0), then ``filler`` characters of ordinary lines."""
    program = tmp_path / "chatty.py"
    program.write_text(PROGRAM)
    app = app_file(tmp_path, "chatty", f"""name: chatty
command: [{sys.executable}, {program}, "{filler}", "{huge}"]
success: '^result'
metrics:
  - {{name: first, regex: '^first (\\S+)', match: first}}
  - {{name: result, regex: '^result (\\S+)'}}
""")
    store = tmp_path / f"s{filler}.jsonl"
    peak, _, code, _, said = own_peak(["run", "--app", app, "--ranks", 1, "--store", store], tmp_path, timeout=200)
    assert code == 0, said[-3000:]
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    return peak, record


def test_huge_line_and_huge_output_are_read_with_a_bound(tmp_path):
    assert HUGE_LINE > MAX_LINE and FILLER > HEAD_LIMIT + TAIL_LIMIT
    # the huge line in the second run only: mpirun's forwarding of it is most of a run's time (5 s of 6 here),
    # and the second run is the one whose memory must not have grown, with twice the output and the line
    runs = {"output": (FILLER, 0), "output x2 and a huge line": (2 * FILLER, HUGE_LINE)}
    peaks = {}
    for name, (filler, huge) in runs.items():
        peaks[name], record = chatty_run(tmp_path, filler, huge)
        assert record["status"] == "ok", record["validation"]
        # the head and the tail were read: the first match at the start, the last at the end
        assert record["metrics"]["first"] == 1.5 and record["metrics"]["result"] == 42.0
        detail = record["validation"]["detail"]
        assert (f"output line(s) 2 longer than {MAX_LINE >> 20} MiB: not read" in detail) == bool(huge), detail
        assert f"only its first {HEAD_LIMIT >> 20} MiB and last {TAIL_LIMIT >> 20} MiB read" in detail, detail
        assert record["output_tail"][-1] == "result 42.0"
        assert all(len(line) <= TAIL_CHARS + 10 for line in record["output_tail"])
    # memory only, not time: twice the output (24 MiB more) and a line over the limit must not cost more memory;
    # what is kept is at most HEAD_LIMIT + TAIL_LIMIT (20 MiB) and a piece of MAX_LINE whatever the output's size
    print(f"peak resident of run --app (MiB): {peaks}")
    first, second = peaks.values()
    assert second - first < 10, peaks
    assert not leftovers(tmp_path)


def test_overlong_line_passes_through_exec_whole_and_is_named(tmp_path, store):
    # exec passes the program's output on unchanged, the overlong line whole; the record names the line
    program = tmp_path / "one.py"
    program.write_text(f"import sys\nsys.stdout.write('a' * {MAX_LINE + 1000} + '\\nvalue 7\\n')\n")
    done = vnetbench("exec", "--topology", "native", "--ranks", 1, "--record", "--store", store, "--",
                     sys.executable, program, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a" * (MAX_LINE + 1000) + "\nvalue 7\n" in done.stdout
    (record,) = [json.loads(line) for line in store.read_text().splitlines()]
    assert record["status"] == "ok"
    assert "output line(s) 1 longer than" in record["validation"]["detail"]
    assert "only its first" not in record["validation"]["detail"]
    assert record["output_tail"][-1] == "value 7" and len(record["output_tail"][0]) < 1000
