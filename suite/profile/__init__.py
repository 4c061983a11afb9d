"""vnetbench.profile: the MPI profiler behind ``--profile`` (summary) and ``--profile trace``.

- ``interposer.c``: the PMPI interposer, preloaded into every rank (built once with ``cc``, cached by source
  hash, header-free: one build serves every MPI); each rank writes its summary (and trace) at MPI_Finalize;
- ``trace``: the trace's format and its reader (``load``);
"""
