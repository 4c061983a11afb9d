"""Kernels by name for scripts and notebooks (``vnetbench.run_kernel``): a KernelWorkload handed to the engine."""

from vnetbench.workloads.kernel import KernelWorkload


def run_kernel(kernel: str, params: dict | None = None, ranks: int = 1, **options) -> list[dict]:
    """Run ``kernel`` with ``params`` (its options; defaults fill the rest) on ``ranks`` ranks; the records.

    ``options`` are ``engine.run``'s: topology, repeat, store, timeout, bind, mpi, rank_options (mem_policy,
    allow_single_node, counters), realised (a topology that is up), on_record. A failed or timed-out
    repetition is recorded, not raised; bad input raises UsageError before anything starts.
    """
    from vnetbench import engine

    return engine.run(KernelWorkload(kernel, params), ranks, **options)


def prepare(kernel: str, params: dict | None, ranks: int) -> tuple[object, dict]:
    """The kernel module and its complete params; UsageError if they cannot run on ``ranks``."""
    workload = KernelWorkload(kernel, params)
    workload.check(ranks)
    return workload.module, workload.params


def run_once(realised, spec, kernel, params, ranks, repetition, timeout, rank_options=None, bind_requested=None,
             launcher=None) -> dict:
    """One repetition of ``kernel`` on a realised topology with a LaunchSpec from ``realised.launch``."""
    from vnetbench import engine
    from vnetbench.mpi import selection as mpiselect

    return engine.run_once(KernelWorkload(kernel, params), realised, spec, ranks, repetition, timeout,
                           launcher or mpiselect.choose(None)[0], bind=bind_requested, rank_options=rank_options)
