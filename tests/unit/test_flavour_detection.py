"""Which launcher flavour (and version) each launcher's --version output is: every registered flavour
asked in turn, as ``flavours.detect`` does (the real launchers are asked in tests/mpi_flavours)."""

import pytest

from vnetbench.mpi import flavours

INTEL = "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\nCopyright 2003-2023"
OUTPUTS = [
    ("mpirun (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/", ("openmpi5", "5.0.11")),
    ("prterun (PRRTE) 3.0.6\n", None),  # PRRTE's own numbering is not Open MPI's
    ("prterun (PRRTE) 5.0.2\n", ("openmpi5", "5.0.2")),
    ("mpirun.openmpi (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/", ("openmpi4", "4.1.4")),
    ("mpirun (Open MPI) 4.0.3\n", ("openmpi4", "4.0.3")),
    ("HYDRA build details:\n    Version:                                 4.0.2\n    Release Date: 2022",
     ("mpich", "4.0.2")),
    ("HYDRA build details:\n    CC: gcc\n", ("mpich", "unknown")),
    (INTEL, ("intelmpi", "2021.10")),
    (INTEL + "\nHYDRA build details:\n    Version: 2021.10\n", ("intelmpi", "2021.10")),
    ("mpiexec (LAM/MPI) 7.1.4\n", None),
    ("", None),
]


def _flavour(text: str):
    for cls in flavours.flavours():
        version = cls.matches(text)
        if version:
            return cls.name, version
    return None


@pytest.mark.parametrize("text, expected", OUTPUTS, ids=[repr(t[:24]) for t, _ in OUTPUTS])
def test_each_version_output_names_one_flavour(text, expected):
    assert _flavour(text) == expected


def test_no_two_flavours_claim_the_same_output():
    for text, _ in OUTPUTS:
        claims = [cls.name for cls in flavours.flavours() if cls.matches(text)]
        assert len(claims) <= 1, (text, claims)


def test_each_flavour_renders_the_settings_a_starter_gives_its_ranks():
    """srun sets Open MPI's settings in the ranks' environment itself: in the flavour's own names."""
    intent = flavours.Intent(ranks=2, mca={"btl": "self,sm,tcp", "pml": "ob1"})
    assert flavours.OpenMPI5("/v/bin/mpirun", "5.0.11").rank_mca(intent) == {"btl": "self,sm,tcp", "pml": "ob1"}
    assert flavours.OpenMPI4("/usr/bin/mpirun", "4.1.4").rank_mca(intent) == {"btl": "self,vader,tcp", "pml": "ob1"}
    assert flavours.Mpich("/usr/bin/mpiexec.hydra", "4.0.2").rank_mca(intent) == {}


def test_hydra_places_ranks_round_robin_with_its_own_option():
    """MPICH 4's Hydra has no -rr (it refuses it): one rank per host in turn is -ppn 1."""
    intent = flavours.Intent(ranks=4, hosts=[("n0", 2), ("n1", 2)], map_by="node")
    argv = flavours.Mpich("/usr/bin/mpiexec.hydra", "4.0.2").command(intent, ["./hello"])
    assert argv[argv.index("-ppn") + 1] == "1" and "-rr" not in argv
