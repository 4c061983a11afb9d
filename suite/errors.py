"""The errors vnetbench raises; the CLI maps them to exit codes (2: bad input, 1: failure, 128+N: signal N)."""

import signal


class VnetbenchError(Exception):
    """Base of every error vnetbench raises on purpose."""

    exit_code = 1


class UsageError(VnetbenchError):
    """Bad input: an option, a field or a file that is not allowed. Nothing was started."""

    exit_code = 2


class SpecError(UsageError):
    """A topology or inventory that does not validate."""


class LaunchError(VnetbenchError):
    """mpirun or a backend could not start or finish a run."""


class StoreError(VnetbenchError):
    """The results store cannot be read or written."""


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived: unwind as Ctrl-C does, tearing down on the way out."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


def interrupt_on_signals(signals=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) -> None:
    """Raise ``Interrupted`` where the program is at the first of ``signals``. Later ones are
    ignored: vnetbench is already stopping, and a second Ctrl-C must not cut its teardown short."""
    def handler(signum, frame):
        for sig in signals:  # inherited by nothing that matters: nothing new starts after this
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    for sig in signals:
        signal.signal(sig, handler)
