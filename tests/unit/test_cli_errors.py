"""Bad input to the real CLI: one line naming the option, exit 2, nothing launched or written."""

import pytest

from conftest import vnetbench


@pytest.mark.parametrize("args, phrase", [
    (["run", "nbody"], "kernel: unknown kernel 'nbody'"),
    (["run", "pingpong", "--ranks", "1"], "--ranks: pingpong needs at least 2 ranks"),
    (["run", "allreduce", "--ranks", "0"], "argument --ranks: 0 is out of range"),
    (["run", "allreduce", "--ranks", "two"], "argument --ranks: 'two' is not a whole number"),
    (["run", "allreduce", "--ranks", "100000"], "argument --ranks: 100000 is out of range; allowed: 1 to 4096"),
    (["run", "allreduce", "--repeat", "-1"], "argument --repeat"),
    (["run", "allreduce", "--timeout", "0"], "argument --timeout"),
    (["run", "pingpong", "--max-size", "3"], "--max-size: 3 is not allowed"),
    (["run", "allreduce", "--store", "/proc/no/such/store.jsonl"], "--store: cannot create"),
    (["run", "allreduce", "--bogus"], "--bogus: not an option of kernel allreduce"),
    (["run", "allreduce", "--topology", "no-such-topology"], "--topology"),
    (["report", "--store", "/nonexistent/results.jsonl"], "--store: /nonexistent/results.jsonl does not exist"),
    (["ingest", "/nonexistent/record.json"], "FILE: /nonexistent/record.json does not exist"),
    (["report", "--format", "xml"], "argument --format: invalid choice"),
    (["run", "allreduce", "--topology", "native", "--vms", "qemu"], "--vms qemu: native has no VMs to boot"),
    (["run", "allreduce", "--profile", "full"], "--profile: 'full' is not a mode; allowed: summary, trace"),
    (["exec", "--topology", "native", "--ranks", "2", "--profile", "calls", "--", "true"],
     "--profile: 'calls' is not a mode; allowed: summary, trace"),
    (["run", "allreduce", "--topology", "2vm-1vswitch", "--vms", "qemu", "--profile"],
     "--profile: the ranks of 2vm-1vswitch-qemu (QemuBackend) write their files where this host cannot read them"),
    (["exec", "--topology", "native", "--ranks", "2", "--profile", "--store", "s.jsonl", "--", "/sbin/ldconfig"],
     "--profile: /sbin/ldconfig is linked statically: nothing can be preloaded into it"),
    (["run", "allreduce", "--topology", "2vm-1vswitch", "--vms", "qemu", "--guest-kernel", "/dev/zero"],
     "--guest-kernel: /dev/zero: a character device, not a regular file"),
    # the options naming hosts come from the backends' registry lines, --group qualifying --inventory
    (["hosts", "check", "--hostfile", "/etc/hostname", "--group", "workers"], "--group: only with --inventory"),
    (["hosts", "facts", "--slurm", "debug"], "one of the arguments --topology --hostfile --inventory is required"),
    (["run", "allreduce", "--group", "workers"], "--group: not an option of kernel allreduce"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, phrase):
    if "--store" not in args and args[0] == "run":
        args = [*args, "--store", str(tmp_path / "s.jsonl")]
    proc = vnetbench(*args, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # the error alone: no run was announced, so none started
    assert phrase in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s.jsonl").exists()
    assert not (tmp_path / "vnetbench-results").exists()


def test_ingest_refuses_a_non_record_naming_file_and_line(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text('{"kernel": "halo"}\n')
    proc = vnetbench("ingest", bad, "--store", tmp_path / "s.jsonl")
    assert proc.returncode == 2
    assert f"{bad}:1: not a vnetbench record" in proc.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_help_lists_commands_and_kernel_options():
    top = vnetbench("--help", check=0)
    for command in ("run", "report", "ingest"):
        assert command in top.stdout
    run_help = vnetbench("run", "pingpong", "--help", check=0)
    assert "--max-size" in run_help.stdout and "--ranks" in run_help.stdout
