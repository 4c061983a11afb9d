"""vnetbench's performance harness: each kernel against a C reference of the same loop, same run."""

FORMAT_VERSION = 1


class HarnessError(Exception):
    """The harness itself could not do its job: no compiler, a reference that will not build."""
