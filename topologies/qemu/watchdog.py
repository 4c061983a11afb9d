"""A run's guests end with the run: a small process beside them that ends them once the run's vnetbench is gone.

A run that dies of SIGKILL (or of anything that skips its teardown) cannot end its guests itself, and QEMU is not
its child: virtme-run forks it, and exits on SIGTERM leaving it running, so no parent-death signal reaches it. The
watchdog, started before the guests, looks at the run's process (pid and start time: never a reused pid) twice a
second; once it is gone, it ends the topology's guests (guests.stop) and exits. It carries the guests' mark, so the
run's own teardown ends it with them. The taps and bridges stay for ``topology cleanup`` (or the next run), as
after any crash; topologies brought up with ``topology up`` have no owner and no watchdog: their guests stay up.
"""

import os
import subprocess
import sys
import time

POLL_S = 0.5


def start(topology_id: str, owner: dict) -> None:
    """Start the watchdog of ``topology_id``'s guests for ``owner`` (the state's owner: pid and start time)."""
    from ..thishost import state
    from .guests import MARK

    env = {**os.environ, MARK: str(state.directory(topology_id) / ".watchdog")}
    subprocess.Popen([sys.executable, "-m", __name__, topology_id, str(owner["pid"]), str(owner["start"])],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                     start_new_session=True, close_fds=True)


def _running(owner: dict) -> bool:
    """The run's process is there and not a zombie (dead, its parent not yet told)."""
    from vnetbench.core import procs

    from ..thishost import state

    fields = procs.stat_fields(owner["pid"])
    return state.alive(owner) and bool(fields) and fields[0] != "Z"


def main(argv: list[str]) -> int:
    from ..thishost import state

    topology_id, owner = argv[0], {"pid": int(argv[1]), "start": int(argv[2])}
    while _running(owner):
        if not state.directory(topology_id).exists():
            return 0  # taken down already (its teardown also ends this process)
        time.sleep(POLL_S)
    from .guests import stop

    stop(topology_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
