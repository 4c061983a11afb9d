"""Real applications as first-class runs: an MPI program's results in the store, like a kernel's.

- ``model.load_app(path)``: the YAML definition (command, env, timeout, parser, success, metrics),
  validated with file:line:field errors; ``model.adhoc(argv, parser)`` for ``exec --record``;
- ``parsers``: the built-in readers of OSU, IMB and LAMMPS output, registered by name;
- ``run.run_app(app, ranks, ...)``: repetitions on a topology, each one record in the store;
- ``wrapper``: the rank side (placement seen from inside the rank, then exec of the program);
- ``worldsize``: the world-size guard (a preloaded shim notes the world each MPI process joined);
- ``workload``: the kernel contract (metrics, table, headline) filled from a record's declaration.
"""

from .model import App, adhoc, load_app

__all__ = ["App", "adhoc", "load"]
