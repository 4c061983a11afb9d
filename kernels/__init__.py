"""Rank-side MPI kernels, registered by name; ``python -m vnetbench.kernels KERNEL`` runs one.

A kernel is one module filling the contract in ``contract.py``: its options and checks, the
rank-side run, and the metrics, tables and headline that report, compare and plots read.
Adding a kernel is adding its module and one line here; the order here is the report's order.

Importing this package must not initialise MPI: the launcher imports kernels to parse options.
"""

from vnetbench.core.registry import Registry

KERNELS = Registry("kernel", {
    "stream": "stream",
    "halo": "halo",
    "md": "md",
    "pingpong": "pingpong",
    "allreduce": "allreduce",
}, package=__name__)


def names() -> list[str]:
    return list(KERNELS)


def get(name: str):
    """The kernel module registered as ``name``; UsageError for an unknown one."""
    return KERNELS.load(name)


def find(name: str):
    """The kernel module registered as ``name``, or None (a record from a newer vnetbench)."""
    return KERNELS.find(name)


def parse_params(name: str, argv: list[str]) -> dict:
    """Parse kernel options (as typed after the kernel name) into a params dict with defaults."""
    from vnetbench.core.options import ArgumentParser

    kernel = get(name)
    parser = ArgumentParser(prog=f"vnetbench run {name}", add_help=False)
    kernel.add_arguments(parser)
    ns, rest = parser.parse_known_args(argv)
    if rest:
        from vnetbench.core.errors import UsageError

        raise UsageError(f"{rest[0]}: not an option of kernel {name}; see 'vnetbench run {name} --help'")
    return vars(ns)


def defaults(name: str) -> dict:
    return parse_params(name, [])


# how every rank runs, whatever the kernel: set on `vnetbench run` or on a direct launch
RANK_OPTIONS = ("mem_policy", "allow_single_node", "counters")


def add_rank_options(parser) -> None:
    parser.add_argument("--mem-policy", choices=["local", "remote", "interleave"],
                        help="each rank's memory: on its cpus' NUMA node (local, the default), on another "
                             "node (remote), or interleaved over all nodes")
    parser.add_argument("--allow-single-node", action="store_true",
                        help="run remote/interleave on a one-node machine anyway (recorded as single-node)")
    parser.add_argument("--counters", action="store_true",
                        help="record perf counters per rank (cycles, instructions, LLC and node misses "
                             "where readable; the reason where not)")
