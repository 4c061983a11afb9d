"""Failure is never silent: each way a real program can fail gives a record with its status and the
reason, exit 1, and the store's earlier lines untouched; bad input exits 2 before anything starts."""

import json
import time

import pytest

from apps.conftest import app_file, leftovers, requires_lammps
from conftest import requires_mpi, vnetbench

pytestmark = [requires_mpi, pytest.mark.timeout(120)]

EARLIER = '{"an earlier line": "must stay as it is"}\n'


@pytest.fixture
def seeded(store):
    store.write_text(EARLIER)  # not a record: the store is never rewritten, only appended to
    return store


def one_failure(seeded, app, *extra) -> dict:
    done = vnetbench("run", "--app", app, "--ranks", 2, "--store", seeded, *extra)
    assert done.returncode == 1, done.stderr[-2000:]
    text = seeded.read_text()
    assert text.startswith(EARLIER)
    (record,) = [json.loads(line) for line in text[len(EARLIER):].splitlines()]
    assert record["validation"]["passed"] is False
    assert f"{record['status']}: {record['validation']['detail'][:60]}" in done.stderr
    assert not leftovers(seeded.parent)
    return record


def test_a_program_that_exits_non_zero(tmp_path, seeded):
    app = app_file(tmp_path, "exits", "name: exits\ncommand: [sh, -c, 'echo partial; exit 3']\n")
    record = one_failure(seeded, app)
    assert record["status"] == "failed" and "exited with status" in record["validation"]["detail"]
    assert record["exit_status"] != 0 and "partial" in record["output_tail"]
    assert record["metrics"]["elapsed_s"] > 0


def test_a_program_that_is_killed(tmp_path, seeded):
    app = app_file(tmp_path, "killed", "name: killed\ncommand: [sh, -c, 'kill -KILL $$']\n")
    record = one_failure(seeded, app)
    assert record["status"] == "failed"
    assert "signal 9" in record["validation"]["detail"] or "SIGKILL" in record["validation"]["detail"]


def test_a_program_that_times_out(tmp_path, seeded):
    app = app_file(tmp_path, "sleeps", "name: sleeps\ncommand: [sleep, '60']\ntimeout: 60\n")
    record = one_failure(seeded, app, "--timeout", 2)  # the option over the definition's timeout
    assert record["status"] == "timeout" and "no exit after 2 s" in record["validation"]["detail"]
    assert 2 <= record["metrics"]["elapsed_s"] < 30


@requires_lammps
def test_a_missing_success_pattern(lj_app, seeded):
    lj_app.write_text(lj_app.read_text().replace("'Total wall time'", "'Simulation converged'"))
    record = one_failure(seeded, lj_app)
    assert record["status"] == "invalid" and record["exit_status"] == 0
    assert record["validation"]["detail"] == "success pattern 'Simulation converged' not found in the output"
    assert record["metrics"]["loop_time_s"] > 0  # what was read is kept, but the run does not count


@requires_lammps
def test_a_missing_declared_metric(lj_app, seeded):
    text = lj_app.read_text()
    assert "'Ave neighs/atom = ([0-9.eE+-]+)'" in text
    lj_app.write_text(text.replace("'Ave neighs/atom = ([0-9.eE+-]+)'", "'Energy drift ([0-9.eE+-]+)'"))
    record = one_failure(seeded, lj_app)
    assert record["status"] == "invalid"
    assert "metric neighbours_per_atom: regex 'Energy drift ([0-9.eE+-]+)' matched nothing" in record["validation"]["detail"]


def test_a_metric_pattern_that_cannot_finish_ends_with_the_run_s_timeout(tmp_path, seeded):
    # a lookahead needs Python's backtracking re, and (a+)+ before a failing x backtracks 2^40 ways: the pattern
    # gets what is left of the run's timeout, then the run is invalid, naming the metric
    app = app_file(tmp_path, "slow", "name: slow\ncommand: [sh, -c, 'echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!']\n"
                                     "timeout: 60\nmetrics: [{name: slow, regex: '((a+)+)(?!a)x'}]\n")
    started = time.monotonic()
    record = one_failure(seeded, app, "--timeout", 4)
    assert time.monotonic() - started < 30
    assert record["status"] == "invalid" and record["exit_status"] == 0
    detail = record["validation"]["detail"]
    assert detail.startswith("metric slow: regex '((a+)+)(?!a)x': gave up after ") and "\n" not in detail, detail


@pytest.mark.parametrize("command, message", [
    ("[no-such-program-vnb]", "command[0]: program 'no-such-program-vnb' not found on PATH"),
    ("[./missing-input.sh]", "command[0]: program './missing-input.sh' not found"),
])
def test_bad_input_exits_2_before_anything_starts(tmp_path, seeded, command, message):
    app = app_file(tmp_path, "bad", f"name: bad\ncommand: {command}\n")
    done = vnetbench("run", "--app", app, "--ranks", 2, "--store", seeded)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert seeded.read_text() == EARLIER
    assert not leftovers(tmp_path)


def test_bad_definition_in_sweep_and_bad_parser_in_exec_exit_2(tmp_path, store):
    app = app_file(tmp_path, "bad", "name: bad\ncommand: [sh]\nmetrics: [{name: x, regx: 'a(b)'}]\n")
    done = vnetbench("sweep", "--app", app, "--topologies", "native", "--ranks", 2, "--store", store)
    assert done.returncode == 2 and "bad.yaml:3: metrics[0].regx: unknown field (did you mean 'regex'?)" in done.stderr
    done = vnetbench("exec", "--topology", "native", "--ranks", 2, "--record", "--parser", "namd", "--store", store,
                     "--", "true")
    assert done.returncode == 2 and "--parser: unknown parser 'namd'" in done.stderr
    done = vnetbench("exec", "--topology", "native", "--ranks", 2, "--parser", "osu", "--", "true")
    assert done.returncode == 2 and "--parser: only with --record" in done.stderr
    done = vnetbench("run", "--app", app_file(tmp_path, "fine", "name: fine\ncommand: [sh]\n"), "--mem-policy",
                     "local", "--store", store)
    assert done.returncode == 2 and "--mem-policy: a kernel option" in done.stderr
    assert not store.exists()
