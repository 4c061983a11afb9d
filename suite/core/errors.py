"""The errors vnetbench raises; the CLI maps them to exit codes (2: bad input, 1: failure, 128+N: signal N)."""

import signal
import threading


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


class signals_blocked:
    """Hold SIGINT/SIGTERM/SIGHUP while tearing down, or while a tool that makes something runs, so that a ^C
    cannot leave half a topology; a signal that came meanwhile is delivered again at the end."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        self.caught, self.previous = [], {}
        if threading.current_thread() is threading.main_thread():
            try:
                for sig in self.SIGNALS:
                    if signal.getsignal(sig) == signal.SIG_IGN:
                        continue  # ignored stays ignored, also by the tools started meanwhile
                    self.previous[sig] = signal.signal(sig, lambda signum, frame: self.caught.append(signum))
            except BaseException:  # a signal between two of these: leave the handlers as they were
                self.__exit__()
                raise

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self.caught):
            signal.raise_signal(sig)
