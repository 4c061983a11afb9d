"""The MPI library of a launcher (vnetbench.core.mpilib): found in its installation, selected for the mpi4py wheel,
and checked against what MPI_Get_library_version says. Installations are folders made here; the real MPIs are
in tests/mpi_flavours."""

import os

import pytest

from vnetbench.core import mpilib
from vnetbench.kernels.__main__ import _named_mpi

MULTIARCH = f"{os.uname().machine}-linux-gnu"
OPEN_MPI_4 = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022\x00"
OPEN_MPI_5 = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11, repo rev: v5.0.11rc1"
MPICH = "MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 12:34:45 CDT 2022\nMPICH ABI:\t14:2:2\n"
INTEL = "Intel(R) MPI Library 2021.10 for Linux* OS\n"
MVAPICH = "MVAPICH2 Version      :\t2.3.7\nMVAPICH2 Release date :\tWed March 02 22:00:00 EST 2022\n"


@pytest.mark.parametrize("text, expected", [
    (OPEN_MPI_4, ("openmpi", "Open MPI", "4.1.4")),
    (OPEN_MPI_5, ("openmpi", "Open MPI", "5.0.11")),
    (MPICH, ("mpich", "MPICH", "4.0.2")),
    (INTEL, ("mpich", "Intel MPI", "2021.10")),
    (MVAPICH, ("mpich", "MVAPICH2", "2.3.7")),
])
def test_the_library_says_its_family_product_and_version(text, expected):
    assert mpilib.identify(text) == expected


def selected(family="openmpi", product="Open MPI", version="4.1.4", path="/usr/lib/libmpi.so.40.30.4"):
    return {"path": path, "family": family, "soname": "libmpi.so.40", "product": product, "version": version,
            "found_by": "prefix /usr", "chosen_by": "--mpi /usr/bin/mpirun.openmpi"}


def test_the_named_library_passes_and_is_recorded_as_loaded():
    seen, problem = mpilib.check_loaded(selected(), OPEN_MPI_4, ["/usr/lib/libmpi.so.40.30.4"], "/usr/bin/mpirun.openmpi")
    assert problem is None
    assert seen == {**selected(), "path": "/usr/lib/libmpi.so.40.30.4"}


def test_another_version_of_the_named_product_fails_naming_both():
    seen, problem = mpilib.check_loaded(selected(), OPEN_MPI_5, ["/v/lib/libmpi.so.40"], "/usr/bin/mpirun.openmpi")
    assert problem == ("MPI library: the ranks loaded Open MPI 5.0.11 (/v/lib/libmpi.so.40) but --mpi named "
                       "Open MPI 4.1.4 (/usr/bin/mpirun.openmpi, library from prefix /usr)")
    assert seen["version"] == "5.0.11" and seen["path"] == "/v/lib/libmpi.so.40"


def test_another_family_fails_and_a_derivative_of_the_named_family_does_not():
    hydra = selected("mpich", "MPICH", "3.4", "/opt/mvapich2/lib/libmpi.so.12.1.1")
    _, problem = mpilib.check_loaded(hydra, OPEN_MPI_4, ["/usr/lib/libmpi.so.40.30.4"], "/opt/mvapich2/bin/mpiexec")
    assert problem.startswith("MPI library: the ranks loaded Open MPI 4.1.4 (/usr/lib/libmpi.so.40.30.4) but "
                              "--mpi named MPICH 3.4 (/opt/mvapich2/bin/mpiexec")
    # MVAPICH's Hydra reports an MPICH version, its library its own: the same family, another product
    seen, problem = mpilib.check_loaded(hydra, MVAPICH, ["/opt/mvapich2/lib/libmpi.so.12.1.1"], "/opt/mvapich2/bin/mpiexec")
    assert problem is None and seen["product"] == "MVAPICH2"


def installation(root, launcher="bin/mpirun", libdir=f"lib/{MULTIARCH}", files=("libmpi.so.40.30.4",),
                 links=(("libmpi.so.40", "libmpi.so.40.30.4"),)):
    """PREFIX/bin/LAUNCHER and PREFIX/LIBDIR with ``files`` and ``links`` (name -> target)."""
    (root / os.path.dirname(launcher)).mkdir(parents=True, exist_ok=True)
    (root / launcher).write_text("#!/bin/sh\n")
    (root / launcher).chmod(0o755)
    (root / libdir).mkdir(parents=True, exist_ok=True)
    for name in files:
        (root / libdir / name).write_bytes(b"\x7fELF")
    for name, target in links:
        (root / libdir / name).symlink_to(target)
    return str(root / launcher)


def test_the_library_is_found_in_the_launchers_own_installation_first(tmp_path):
    launcher = installation(tmp_path / "site")
    # Debian's way: /usr/bin/mpirun -> ... -> the real launcher, whose installation is the one that counts
    (tmp_path / "links" / "bin").mkdir(parents=True)
    (tmp_path / "links" / "bin" / "mpirun").symlink_to(launcher)
    installation(tmp_path / "links", launcher="bin/other", files=("libmpi.so.40.0.0",),
                 links=(("libmpi.so.40", "libmpi.so.40.0.0"),))
    found = mpilib.find_library("openmpi", str(tmp_path / "links" / "bin" / "mpirun"))
    assert found.path == str(tmp_path / "site" / "lib" / MULTIARCH / "libmpi.so.40.30.4")
    assert (found.soname, found.found_by) == ("libmpi.so.40", f"prefix {tmp_path / 'site'}")


def test_mpich_under_its_own_name_and_a_development_link_count(tmp_path):
    launcher = installation(tmp_path / "mpich", "bin/mpiexec.hydra", "lib", ("libmpich.so.12.2.2",),
                            (("libmpich.so.12", "libmpich.so.12.2.2"),))
    found = mpilib.find_library("mpich", launcher)
    assert (found.soname, os.path.basename(found.path)) == ("libmpich.so.12", "libmpich.so.12.2.2")
    launcher = installation(tmp_path / "dev", "bin/mpiexec", "lib64", ("libmpi.so.12.1.1",),
                            (("libmpi.so", "libmpi.so.12.1.1"),))
    found = mpilib.find_library("mpich", launcher)
    assert (found.soname, os.path.basename(found.path)) == ("libmpi.so.12", "libmpi.so.12.1.1")
    # a link named as the wheel needs does not rename the library: the loader knows it by its own soname
    launcher = installation(tmp_path / "renamed", "bin/mpiexec", "lib", (),
                            (("libmpi.so.12", str(tmp_path / "mpich" / "lib" / "libmpich.so.12.2.2")),))
    found = mpilib.find_library("mpich", launcher)
    assert (found.soname, found.path) == ("libmpich.so.12", str(tmp_path / "mpich" / "lib" / "libmpich.so.12.2.2"))


def test_a_compiler_wrapper_says_where_its_library_is(tmp_path):
    libdir = tmp_path / "elsewhere" / "lib"
    installation(tmp_path / "elsewhere", "bin/unused", "lib", ("libmpich.so.12.2.2",),
                 (("libmpich.so.12", "libmpich.so.12.2.2"),))
    launcher = installation(tmp_path / "bin-only", "bin/mpiexec.mpich", "lib", (), ())
    wrapper = tmp_path / "bin-only" / "bin" / "mpicc.mpich"
    wrapper.write_text(f"#!/bin/sh\n[ \"$1\" = -show ] && echo gcc -I/x -L{libdir} -lmpich\n")
    wrapper.chmod(0o755)
    found = mpilib.find_library("mpich", launcher)
    assert found.path == str(libdir / "libmpich.so.12.2.2") and found.found_by == f"compiler wrapper {wrapper}"


def test_nowhere_to_be_found_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setattr(mpilib, "_ldconfig", lambda family: None)
    launcher = installation(tmp_path / "empty", "bin/mpiexec", "lib", (), ())
    with pytest.raises(mpilib.NotFound, match=r"no libmpi.so.12 or libmpich.so.12 for .*/empty/bin/mpiexec "
                                              r"\(looked in .*/empty/lib\*, no compiler wrapper beside it, ldconfig -p\)"):
        mpilib.find_library("mpich", launcher)


def test_the_wheel_module_s_soname_is_selected_by_path(tmp_path):
    launcher = installation(tmp_path / "ompi")
    env = {"MPI4PY_MPIABI": "mpich"}
    named = {"family": "openmpi", "launcher": launcher,
             "library": selected(version="4.1.4", path="/on/the/launcher/s/host")}
    chosen = mpilib.select(named, env)
    assert env == {"MPI4PY_LIBMPI": str(tmp_path / "ompi" / "lib" / MULTIARCH / "libmpi.so.40.30.4")}
    assert chosen["path"] == env["MPI4PY_LIBMPI"] and chosen["found_by"] == f"prefix {tmp_path / 'ompi'}"
    assert mpilib.select({"family": "openmpi", "launcher": launcher}, env) is None  # nothing named: mpi4py's own


def test_a_renamed_library_gets_a_private_link_first_on_the_launchers_path(tmp_path, monkeypatch):
    monkeypatch.setattr("vnetbench.core.rundir.state_root", lambda: tmp_path / "state")
    real = tmp_path / "libmpich.so.12.2.2"
    real.write_bytes(b"\x7fELF")
    library = mpilib.Library(str(real), "mpich", "libmpich.so.12", "prefix /usr")
    env = mpilib.library_env(library, {"LD_LIBRARY_PATH": "/a:/b"})
    folder = env["LD_LIBRARY_PATH"].split(":")[0]
    assert env["LD_LIBRARY_PATH"] == f"{folder}:/a:/b" and folder.startswith(str(tmp_path / "state" / ".cache"))
    assert os.readlink(os.path.join(folder, "libmpi.so.12")) == str(real)
    assert mpilib.link_dir(str(real), "libmpi.so.12") == folder  # made once, kept
    assert mpilib.library_env(mpilib.Library("/x/libmpi.so.40", "openmpi", "libmpi.so.40", "ldconfig")) == {}


def test_the_rank_reads_what_mpi_named_from_its_context():
    mpi = {"family": "mpich", "launcher": "/usr/bin/mpiexec.hydra"}
    assert _named_mpi(["allreduce", "--context", '{"launch": {"mpi": ' + __import__("json").dumps(mpi) + "}}"]) == mpi
    assert _named_mpi(["allreduce", '--context={"run_id": "x"}']) is None
    assert _named_mpi(["allreduce", "--record", "r.json"]) is None


def test_an_mpi4py_built_from_source_keeps_its_one_mpi(monkeypatch):
    """Not the wheel (an MPI outside both ABIs, built with MPICC=...): the ranks load what it was built against,
    so kernels are refused a launcher of another family, as a program is, and nothing is selected on the ranks."""
    from vnetbench.mpi import selection as mpiselect
    from vnetbench.mpi import linkage
    from vnetbench.mpi import flavours
    from vnetbench.core.errors import UsageError

    launchers = {"openmpi": flavours.OpenMPI5("/v/bin/mpirun", "5.0.11"),
                 "mpich": flavours.Mpich("/site/bin/mpiexec.hydra", "4.1.2")}
    monkeypatch.setattr(mpilib, "wheel_abis", set)
    monkeypatch.setattr(mpiselect, "mpi4py_linkage", lambda: linkage.Linkage("mpich", "libmpi.so.12", "/site/lib"))
    monkeypatch.setattr(mpiselect, "find_launcher", lambda family, library=None: launchers[family])
    monkeypatch.delenv("VNETBENCH_MPI", raising=False)
    launcher, needs = mpiselect.choose("auto")
    assert launcher is launchers["mpich"] and launcher.library is None and "library" not in launcher.describe()
    with pytest.raises(UsageError, match=r"mpi4py \(.*\) is built against the MPICH ABI \(libmpi.so.12\) but --mpi "
                                         r"is Open MPI 5.0.11; use --mpi mpich or --mpi auto"):
        mpiselect.choose("openmpi")
