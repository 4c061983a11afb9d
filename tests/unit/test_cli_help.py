"""Every command's help exits 0; 'run --help' lists the kernels with their descriptions; KERNEL stays required."""

import pytest

from conftest import vnetbench
from vnetbench import cli, kernels

SUBCOMMANDS = [["topology", action] for action in ("list", "show", "up", "down", "status", "cleanup")] + \
              [["hosts", action] for action in ("check", "facts", "fetch")]


@pytest.mark.parametrize("argv", [[name] for name in cli.COMMANDS] + SUBCOMMANDS, ids=" ".join)
def test_every_command_s_help_exits_0(argv):
    for flag in ("-h", "--help"):
        proc = vnetbench(*argv, flag, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("usage: vnetbench " + " ".join(argv))


def test_run_help_lists_every_kernel_with_its_description():
    out = vnetbench("run", "--help", timeout=60).stdout
    listed = out.split("\nkernels:\n", 1)[1]
    for name in kernels.names():
        assert f"  {name:<10} {kernels.get(name).DESCRIPTION}" in listed


def test_run_kernel_help_keeps_the_kernel_s_options():
    proc = vnetbench("run", "halo", "--help", timeout=60)
    assert proc.returncode == 0
    assert "options of kernel halo:" in proc.stdout and "--reduce-every N" in proc.stdout


def test_run_without_a_kernel_is_bad_input_naming_kernel():
    proc = vnetbench("run", "--ranks", "2", timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("vnetbench: error: KERNEL: missing; choose from "
                                   f"{', '.join(kernels.names())} ('vnetbench run --help' describes them)")
