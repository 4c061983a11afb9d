"""Ansible inventories read by Ansible itself: ``ansible-inventory --list`` (ansible-core, the
``deploy`` extra), so inventory directories, plugins, vault, every host-range form and INI
values typed as Ansible types them work as in Ansible.

``read(path)`` gives the groups (hosts, children) and each host's variables, already merged by
Ansible (group_vars, host_vars, group and host variables), or None when ansible-inventory is
not installed, cannot read the file or warns about it: ``inventory`` then reads it with its
own reader, which names the line of what it cannot read.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

TIMEOUT_S = 60
# the inventory's JSON is a few KiB per host; more than this is not an inventory of a cluster
MAX_OUTPUT = 64 << 20


def command() -> str | None:
    """ansible-inventory beside this Python (a venv's), else on PATH; None when absent."""
    beside = Path(sys.executable).parent / "ansible-inventory"
    return str(beside) if beside.exists() else shutil.which("ansible-inventory")


def read(path: Path):
    """(groups: name -> {"hosts": [...], "children": [...]}, host -> merged variables), or None."""
    program = command()
    if program is None or os.environ.get("VNETBENCH_INVENTORY_READER") == "own":
        return None
    # fail on a file Ansible cannot parse, rather than warn and list an empty inventory
    env = dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="True", ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="True",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="False")
    try:
        returncode, stdout, stderr = _bounded_run([program, "--list", "-i", str(path)], env)
    except OSError:
        return None
    # a warning means Ansible skipped part of the file (an unknown key, a bad line): the own reader
    # then names what it is, rather than a topology built from what Ansible kept
    if returncode != 0 or len(stdout) > MAX_OUTPUT or b"WARNING" in stderr:
        return None
    try:
        data = json.loads(stdout)
    except ValueError:
        return None
    host_vars = (data.pop("_meta", {}) or {}).get("hostvars", {}) or {}
    groups = {name: {"hosts": list(body.get("hosts", [])), "children": list(body.get("children", []))}
              for name, body in data.items() if isinstance(body, dict)}
    for group in groups.values():
        for host in group["hosts"]:
            host_vars.setdefault(host, {})
    if not host_vars:  # Ansible lists a reversed range (node[5:2]) as no hosts, silently
        return None
    return groups, host_vars


def _bounded_run(argv: list[str], env: dict) -> tuple[int, bytes, bytes]:
    """(exit status, stdout, stderr) of ``argv``, reading at most MAX_OUTPUT + 1 bytes of its output (a dynamic
    inventory plugin can print without end) and 64 KiB of its errors; killed past TIMEOUT_S or MAX_OUTPUT."""
    with tempfile.TemporaryFile() as errors, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, env=env,
                                                               stdin=subprocess.DEVNULL) as proc:
        timer = threading.Timer(TIMEOUT_S, proc.kill)
        timer.start()
        try:
            out = proc.stdout.read(MAX_OUTPUT + 1)
            if len(out) > MAX_OUTPUT:
                proc.kill()
            proc.wait()
        except BaseException:  # Ctrl-C, SIGTERM: Popen's exit would wait for the child without end
            proc.kill()
            raise
        finally:
            timer.cancel()
        errors.seek(0)
        return proc.returncode, out, errors.read(1 << 16)
