"""The errors vnetbench raises; the CLI maps them to exit codes (2: bad input, 1: failure)."""


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
