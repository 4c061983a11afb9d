"""Gone: the MPI-flavours tier no longer builds mpi4py against each MPI (issue 22). The PyPI mpi4py wheel loads
either ABI, and ``--mpi`` makes the ranks load the named MPI's library (``vnetbench.mpilib``): run with the tests'
own venv and ``--mpi mpich`` (or a launcher's path). What still imports this module skips, saying so; remove
it with its last user (tests/slurm's ``test_srun_starts_mpich_ranks_with_pmi2``)."""


class Unavailable(Exception):
    """Why a venv cannot be had here (the reason a test skips with)."""


def venv(name: str):
    raise Unavailable(f"{name}: no mpi4py venvs are built any more; use sys.executable with --mpi (issue 22)")
