"""ansible-playbook run for real against SshdHosts, and a wheel of this checkout for the playbooks to install."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .sshd_hosts import SshdHosts

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "ansible"
BIN = Path(sys.executable).parent


def ansible_tool(name: str) -> str | None:
    candidate = BIN / name
    return str(candidate) if candidate.exists() else shutil.which(name)


# set by tests/harness/lanes.py: a folder where the wheelhouse is being made for this run, outside the sandbox
# that runs the deploy tier (it has no route to PyPI)
PREPARED = "VNETBENCH_TEST_WHEELHOUSE"
PREPARE_TIMEOUT = 900


def vnetbench_wheelhouse(directory: Path, tmp: Path | None = None) -> tuple[Path, Path]:
    """A wheel of this checkout, and a wheelhouse with it and its dependencies (for hosts without PyPI).

    The wheel is built from a copy of the sources (setuptools would leave build/ in the checkout). When the
    run prepares it outside the sandbox (``PREPARED``), that one is waited for and used. ``tmp``: pip's
    temporary folder (default: the system's).
    """
    if os.environ.get(PREPARED):
        return prepared(Path(os.environ[PREPARED]))
    source = directory / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.egg-info")
    source.mkdir(parents=True)
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, source / name)
    for name in ("suite", "kernels", "topologies"):
        shutil.copytree(REPO / name, source / name, ignore=ignore)
    wheels, house = directory / "wheels", directory / "wheelhouse"
    env = {**os.environ, "TMPDIR": str(tmp)} if tmp else None
    _pip("wheel", "-q", "--no-deps", "-w", str(wheels), str(source), env=env)
    (wheel,) = wheels.glob("vnetbench-*.whl")
    _pip("download", "-q", "-d", str(house), str(wheel), env=env)
    return wheel, house


def prepare(directory: Path) -> None:
    """``vnetbench_wheelhouse`` into ``directory``, then ``.complete`` there (or ``.failed`` with why); pip's
    temporary files in there too, not in the /tmp whose entries the other lane's tests compare."""
    import traceback

    shutil.rmtree(directory, ignore_errors=True)
    (directory / "tmp").mkdir(parents=True)
    try:
        vnetbench_wheelhouse(directory, tmp=directory / "tmp")
    except BaseException as exc:  # noqa: BLE001 - said to the tier that waits, whatever it was
        (directory / ".failed").write_text("".join(traceback.format_exception_only(exc)))
        raise
    (directory / ".complete").write_text("made\n")


def prepared(directory: Path) -> tuple[Path, Path]:
    import time

    deadline = time.monotonic() + PREPARE_TIMEOUT
    while not (directory / ".complete").exists():
        assert not (directory / ".failed").exists(), \
            f"the wheelhouse could not be made: {(directory / '.failed').read_text()}"
        assert time.monotonic() < deadline, f"the wheelhouse in {directory} was not made in {PREPARE_TIMEOUT} s"
        time.sleep(0.5)
    (wheel,) = (directory / "wheels").glob("vnetbench-*.whl")
    return wheel, directory / "wheelhouse"


def _pip(*args: str, env: dict | None = None) -> None:
    argv = [sys.executable, "-m", "pip", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}"


class Ansible:
    """ansible-playbook against SshdHosts, with everything it writes kept in the hosts' directory."""

    def __init__(self, hosts: SshdHosts, inventory: Path):
        self.hosts, self.inventory = hosts, inventory
        self.playbook_cmd = ansible_tool("ansible-playbook")
        home = hosts.dir / "ansible"
        self.env = dict(os.environ,
                        ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
                        ANSIBLE_HOME=str(home),
                        ANSIBLE_LOCAL_TEMP=str(home / "local"),
                        ANSIBLE_REMOTE_TEMP=str(home / "remote"),
                        ANSIBLE_SSH_CONTROL_PATH_DIR=str(hosts.control_dir),
                        ANSIBLE_ASYNC_DIR=str(home / "async"),
                        ANSIBLE_NOCOLOR="1",
                        ANSIBLE_TIMEOUT="5")

    def play(self, playbook: str, *args: str, forks: int = 5, timeout: float = 600) -> "Played":
        """Run ``playbook``. The test hosts share one filesystem, so a play that installs the same venv
        on every host must run them one at a time (forks=1), where real hosts would not race."""
        argv = [self.playbook_cmd, "-i", str(self.inventory), str(ANSIBLE_DIR / playbook), *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=dict(self.env, ANSIBLE_FORKS=str(forks)), stdin=subprocess.DEVNULL)
        return Played(proc)


class Played:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr
        # PLAY RECAP lines: "h0 : ok=5 changed=1 unreachable=0 failed=0 skipped=2 rescued=0 ignored=0"
        self.recap = {}
        for line in proc.stdout.splitlines():
            match = re.match(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", line.strip())
            if match:
                counts = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2)))
                host = self.recap.setdefault(match.group(1), {})
                for key, value in counts.items():
                    host[key] = host.get(key, 0) + value

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def tail(self, chars: int = 6000) -> str:
        return self.output[-chars:]

    def changed_by_play(self) -> dict[str, list[str]]:
        """{play name: its "changed: [host]" lines, handlers' too}, from the default output's PLAY banners."""
        plays, current = {}, None
        for line in self.stdout.splitlines():
            banner = re.match(r"^PLAY \[(.*)\] \*+$", line)
            if banner:
                current = plays.setdefault(banner.group(1), [])
            elif line.startswith("PLAY RECAP"):
                current = None
            elif current is not None and line.startswith("changed: ["):
                current.append(line)
        return plays
