"""vnetbench: what it costs to split MPI codes across VMs, virtual switches and hosts.

The public API for scripts and notebooks:

- ``run_kernel(kernel, params, ranks, ...)`` runs one kernel configuration and returns its records;
- ``Store`` appends and reads result records (JSON Lines, one record per run and repetition);
- ``VnetbenchError`` and its subclasses are the only errors vnetbench raises on purpose;
  ``UsageError`` means bad input (nothing was started).

Names are imported lazily: every MPI rank imports this package, and ranks must start fast.
"""

__version__ = "0.1.0"

_LAZY = {
    "run_kernel": "engine",
    "Store": "core.store",
    "VnetbenchError": "core.errors",
    "UsageError": "core.errors",
    "LaunchError": "core.errors",
    "StoreError": "core.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'vnetbench' has no attribute {name!r}")
