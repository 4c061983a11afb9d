"""Recording shims for the tools vnetbench runs as root: put them first on PATH and every call is logged.

Each shim logs one JSON line (the argv it was called with, the stdin of a ``-batch -`` call, the
network and UTS namespaces it ran in, its parent's argv) to a log file, then runs the real tool
with the same arguments: ``exec`` for an ordinary call, a child fed the same stdin for a batch.
Nothing is mocked: the real ip, tc, nsenter, unshare, umount and hostname do the work.
"""

import json
import shutil
import sys
from pathlib import Path

TOOLS = ("ip", "tc", "nsenter", "unshare", "umount", "hostname")
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

# -I -S: no site, no user environment; stdlib only, so it starts fast and the same everywhere
_SHIM = '''#!{python} -IS
import json, os, subprocess, sys

TOOL, REAL, LOG = {tool!r}, {real!r}, {log!r}


def parent():
    try:
        with open(f"/proc/{{os.getppid()}}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\\0")[:-1]
        with open(f"/proc/{{os.getppid()}}/comm") as handle:
            comm = handle.read().strip()
    except OSError:
        return {{"comm": None, "argv": None}}
    return {{"comm": comm, "argv": [a.decode(errors="backslashreplace") for a in argv]}}


args = sys.argv[1:]
batch = any(a in ("-batch", "-b") and args[i + 1:i + 2] == ["-"] for i, a in enumerate(args))
entry = {{"tool": TOOL, "argv": [TOOL, *args], "pid": os.getpid(), "parent": parent(),
         "netns": os.stat("/proc/self/ns/net").st_ino, "utsns": os.stat("/proc/self/ns/uts").st_ino}}
data = b""
if batch:
    # sys.stdin is None when the caller closed fd 0
    data = sys.stdin.buffer.read() if sys.stdin is not None else b""
    entry["stdin"] = data.decode(errors="backslashreplace")
fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
try:
    os.write(fd, (json.dumps(entry) + "\\n").encode())
finally:
    os.close(fd)
if batch:
    code = subprocess.run([REAL, *args], input=data).returncode
    sys.exit(code if code >= 0 else 128 - code)
os.execv(REAL, [REAL, *args])
'''


def install(folder: Path, log: Path, tools=TOOLS) -> Path:
    """Write one shim per tool into ``folder``, each logging to ``log``; ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        real = shutil.which(tool, path=SYSTEM_PATH)
        if real is None:
            raise FileNotFoundError(f"{tool} is not in {SYSTEM_PATH}")
        shim = folder / tool
        shim.write_text(_SHIM.format(python=sys.executable, tool=tool, real=real, log=str(log)))
        shim.chmod(0o755)
    return folder


def calls(log: Path) -> list[dict]:
    """The logged calls, in the order they were made."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
