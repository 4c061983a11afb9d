"""stream and halo without MPI: options, refusals, cache detection, STREAM's replay, and the
halo layout exchanged between simulated ranks in one process."""

import itertools

import numpy as np
import pytest

from vnetbench import kernels
from vnetbench.core.errors import UsageError
from vnetbench.kernels import halo, stream

pytestmark = pytest.mark.timeout(120)


# --- stream ---

@pytest.mark.parametrize("text, expected", [("32768K", 32 << 20), ("1M", 1 << 20), ("512K\n", 512 << 10),
                                            ("2G", 2 << 30), ("4096", 4096)])
def test_parse_cache_size(text, expected):
    assert stream.parse_cache_size(text) == expected


def _cache(root, index, level, kind, size):
    folder = root / f"index{index}"
    folder.mkdir()
    (folder / "level").write_text(f"{level}\n")
    (folder / "type").write_text(f"{kind}\n")
    (folder / "size").write_text(f"{size}\n")


def test_llc_is_the_largest_cache_of_the_highest_level(tmp_path):
    _cache(tmp_path, 0, 1, "Data", "48K")
    _cache(tmp_path, 1, 1, "Instruction", "32K")
    _cache(tmp_path, 2, 2, "Unified", "2048K")
    _cache(tmp_path, 3, 3, "Unified", "36M")
    assert stream.llc_bytes(tmp_path) == 36 << 20


def test_llc_falls_back_to_32_mib_when_sysfs_says_nothing(tmp_path):
    assert stream.llc_bytes(tmp_path) == 32 << 20
    (tmp_path / "index0").mkdir()  # unreadable entries are skipped, not fatal
    assert stream.llc_bytes(tmp_path / "missing") == 32 << 20
    assert stream.llc_bytes(tmp_path) == 32 << 20


def test_default_array_is_four_times_the_llc():
    n = stream.default_array_size(32 << 20)
    assert n == 16 * 1024 * 1024
    assert 8 * stream.default_array_size(3_000_001) >= 4 * 3_000_001


def test_stream_defaults():
    params = kernels.defaults("stream")
    assert params == {"array_size": None, "ntimes": 20}
    assert stream.array_size(params, llc=1 << 20) == (4 << 20) // 8
    assert stream.array_size({"array_size": 1000, "ntimes": 20}) == 1000


def _replay_with_numpy(n, ntimes):
    a, b, c = np.full(n, 1.0), np.full(n, 2.0), np.zeros(n)
    a = 2.0 * a
    for _ in range(ntimes):
        c[:] = a
        b[:] = 3.0 * c
        c[:] = a + b
        a[:] = b + 3.0 * c
    return a, b, c


@pytest.mark.parametrize("ntimes", [2, 3, 20])
def test_expected_values_replay_the_loops(ntimes):
    for array, value in zip(_replay_with_numpy(5, ntimes), stream.expected_values(ntimes)):
        assert (array == value).all()


@pytest.mark.parametrize("argv, option", [(["--ntimes", "1"], "--ntimes"), (["--array-size", "0"], "--array-size"),
                                          (["--array-size", "many"], "--array-size")])
def test_stream_bad_options_name_the_option(argv, option):
    with pytest.raises(UsageError, match=option):
        kernels.parse_params("stream", argv)


@pytest.mark.parametrize("params, option", [({"array_size": None, "ntimes": 1}, "--ntimes"),
                                            ({"array_size": None, "ntimes": "5"}, "--ntimes"),
                                            ({"array_size": 0, "ntimes": 20}, "--array-size"),
                                            ({"array_size": 2.5, "ntimes": 20}, "--array-size")])
def test_stream_check_refuses(params, option):
    with pytest.raises(UsageError, match=option):
        stream.check(params, 1)


def test_stream_check_refuses_what_does_not_fit(monkeypatch):
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    monkeypatch.delenv("MPI_LOCALNRANKS", raising=False)
    monkeypatch.setattr(stream, "mem_available", lambda: 100 << 20)
    stream.check({"array_size": 1 << 20, "ntimes": 20}, 4)  # 96 MiB fits in 100
    with pytest.raises(UsageError, match=r"--array-size: .* 5 ranks .* 120 MiB; allowed: at most 100 MiB"):
        stream.check({"array_size": 1 << 20, "ntimes": 20}, 5)


def test_memory_check_counts_only_the_ranks_on_this_host(monkeypatch):
    monkeypatch.setattr(stream, "mem_available", lambda: 100 << 20)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    stream.check({"array_size": 1 << 20, "ntimes": 20}, 64)


def test_mem_available_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684092 kB\nMemAvailable:    1024 kB\n")
    assert stream.mem_available(meminfo) == 1 << 20
    assert stream.mem_available(tmp_path / "none") is None


def test_stream_timeout_grows_with_the_work():
    small = stream.default_timeout({"array_size": 1000, "ntimes": 20}, 2)
    large = stream.default_timeout({"array_size": 10**9, "ntimes": 100}, 2)
    assert 0 < small < large


# where numba's cache lives when the install and ~/.cache are not writable: tests/unit/test_numba_cache_dir.py


def _forward_copy(c, a):
    for j in range(a.shape[0]):
        c[j] = a[j]


@pytest.mark.parametrize("dst, src", [(slice(0, 1000), slice(1000, 2000)), (slice(1, 1001), slice(0, 1000)),
                                      (slice(0, 1000), slice(1, 1001)), (slice(0, 1000), slice(0, 1000)),
                                      (slice(0, 0), slice(5, 5))])
def test_copy_keeps_the_loops_meaning_also_on_overlapping_arrays(dst, src):
    from vnetbench.kernels import _stream_loops

    ours, expected = np.arange(2001.0), np.arange(2001.0)
    _stream_loops.copy(ours[dst], ours[src])
    _forward_copy(expected[dst], expected[src])
    assert (ours == expected).all()


def test_copy_calls_memcpy_as_stream_c_does():
    # gcc compiles stream.c's Copy into `call memcpy`; a plain loop was 0.70 of it on an AMD EPYC
    import numba

    from vnetbench.kernels import _stream_loops

    fresh = numba.njit(_stream_loops.copy.py_func)  # a cached dispatcher cannot show its code
    fresh(np.zeros(8), np.ones(8))
    signature = fresh.signatures[0]
    assert "@llvm.memcpy" in fresh.inspect_llvm(signature)
    assert "memcpy" in fresh.inspect_asm(signature)  # a call to libc's, not inlined into a loop


# --- halo: options and refusals ---

def _halo(**given):
    params = kernels.defaults("halo")
    params.update(given)
    return params


def test_halo_defaults():
    params = kernels.defaults("halo")
    assert params["global_grid"] == (102, 102, 102)
    assert (params["steps"], params["compute"], params["neighbours"], params["halo_width"],
            params["reduce_every"], params["corrupt_step"], params["weak"]) == (500, 1, 26, 1, 1, None, False)


@pytest.mark.parametrize("text, expected", [("8", (8, 8, 8)), ("4,5,6", (4, 5, 6))])
def test_grid_option(text, expected):
    assert kernels.parse_params("halo", ["--global", text])["global_grid"] == expected


@pytest.mark.parametrize("argv, option", [(["--global", "4,5"], "--global"), (["--global", "0,4,4"], "--global"),
                                          (["--steps", "0"], "--steps"), (["--steps", "-1"], "--steps"),
                                          (["--neighbours", "8"], "--neighbours"),
                                          (["--halo-width", "0"], "--halo-width")])
def test_halo_bad_options_name_the_option(argv, option):
    with pytest.raises(UsageError, match=option):
        kernels.parse_params("halo", argv)


@pytest.mark.parametrize("given, ranks, pattern", [
    ({"steps": 0}, 1, "--steps"),
    ({"steps": -5}, 1, "--steps"),
    ({"compute": -1}, 1, "--compute"),
    ({"neighbours": 8}, 1, "--neighbours: 8 .* 6 or 26"),
    ({"reduce_every": 0}, 1, "--reduce-every"),
    ({"global_grid": (1, 8, 8)}, 4, r"--global: .* 2x2x1 .* 0 cells thick along x.*--halo-width 1"),
    ({"global_grid": (5, 8, 8), "halo_width": 3}, 8, r"--global: .* 2 cells thick along x.*--halo-width 3"),
    ({"global_grid": (4, 4, 4), "weak": True, "halo_width": 5}, 2, r"--global: .* 4 cells thick"),
    ({"global_grid": (500, 500, 500), "steps": 10**8}, 1, r"--steps: .* 2\^53"),
    ({"corrupt_step": 500}, 1, "--corrupt-step: 500 .* 0 to 499"),
])
def test_halo_check_refuses(given, ranks, pattern):
    with pytest.raises(UsageError, match=pattern):
        halo.check(_halo(**given), ranks)


def test_halo_check_refuses_what_does_not_fit(monkeypatch):
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    monkeypatch.setattr(stream, "mem_available", lambda: 10 << 20)
    with pytest.raises(UsageError, match="--global: .* MiB"):
        halo.check(_halo(), 1)


def test_halo_check_accepts_defaults_at_common_rank_counts():
    for ranks in (1, 2, 4, 8, 16, 64):
        halo.check(_halo(), ranks)


# --- halo: geometry ---

@pytest.mark.parametrize("ranks, dims", [(1, [1, 1, 1]), (2, [2, 1, 1]), (4, [2, 2, 1]), (6, [3, 2, 1]),
                                         (8, [2, 2, 2]), (12, [3, 2, 2]), (16, [4, 2, 2]),
                                         (360, [10, 6, 6]), (97, [97, 1, 1])])
def test_greedy_dims_matches_open_mpi(ranks, dims):
    # values from MPI.Compute_dims(ranks, 3) with Open MPI 5.0.11
    assert halo.greedy_dims(ranks) == dims


def test_blocks_tile_the_axis():
    for total, parts in ((102, 2), (102, 4), (7, 3), (5, 5)):
        spans = [halo.block(total, parts, c) for c in range(parts)]
        assert sum(size for _, size in spans) == total
        assert all(first + size == nxt for (first, size), (nxt, _) in zip(spans, spans[1:]))
        assert max(size for _, size in spans) - min(size for _, size in spans) <= 1


def test_directions():
    everything = halo.directions(26)
    assert len(set(everything)) == 26 and everything[:6] == halo.FACES
    assert all(tuple(-o for o in d) in everything for d in everything)
    assert halo.directions(6) == halo.FACES
    assert halo.direction_name((1, 0, -1)) == "+x-z"


def test_regions_match_in_size():
    size, h = [5, 4, 3], 2
    for offset in halo.directions(26):
        back = tuple(-o for o in offset)
        assert (halo.region_cells(halo.send_region(back, size, h))
                == halo.region_cells(halo.recv_region(offset, size, h)))


def test_expected_indices_wrap_around_the_domain():
    # a 1x1x1 process grid: the ghost left of x=0 is the domain's last x plane
    indices = halo.expected_indices((-1, 0, 0), np.zeros(3, dtype=np.int64), [4, 3, 2], 1, [4, 3, 2])
    assert indices.tolist() == [3 * 6 + j * 2 + k for j in range(3) for k in range(2)]


# --- halo: every rank of a grid simulated in one process, messages delivered by (source, dest, tag) ---

def _rank_of(dims):
    return lambda c: (c[0] * dims[1] + c[1]) * dims[2] + c[2]  # MPI's row-major cart ranks


def _exchange(params, dims, step=3, tamper=None, recv_tag=None):
    """Stamp, pack, deliver and check one step on every rank; each rank's (message, what)."""
    from vnetbench.kernels import _halo_loops as loops

    rank_of = _rank_of(dims)
    coords = itertools.product(range(dims[0]), range(dims[1]), range(dims[2]))
    layouts = sorted((halo.Layout(params, dims, c, rank_of) for c in coords), key=lambda lay: lay.rank)
    fields = [np.zeros([n + 2 * lay.h for n in lay.size]) for lay in layouts]
    sent = {}
    for lay, field in zip(layouts, fields):
        sendbuf = np.zeros(lay.buf_offsets[-1])
        loops.stamp_pack(field, sendbuf, len(halo.FACES), lay.send_regions, lay.buf_offsets, lay.origin,
                         lay.gdims, lay.h, lay.stamp_base(step))
        for m, dest in enumerate(lay.neighbours):
            key = (lay.rank, dest, m)
            assert key not in sent  # (source, dest, tag) names one message
            sent[key] = sendbuf[lay.buf_offsets[m]:lay.buf_offsets[m + 1]].copy()
    if tamper:
        tamper(sent)
    verdicts = []
    for lay, field in zip(layouts, fields):
        recvbuf = np.full(lay.buf_offsets[-1], np.nan)
        for m, source in enumerate(lay.neighbours):
            tag = recv_tag(lay, m) if recv_tag else lay.recv_tags[m]
            message = sent.get((source, lay.rank, tag))
            if message is not None and message.size == lay.counts[m]:
                recvbuf[lay.buf_offsets[m]:lay.buf_offsets[m + 1]] = message
        verdicts.append(loops.unpack_check(field, recvbuf, lay.recv_regions, lay.buf_offsets, lay.sources,
                                           step, lay.nranks, lay.ncells, lay.sums, lay.ordered_sums,
                                           lay.firsts, lay.lasts))
    return verdicts


GRIDS = [([1, 1, 1], (4, 5, 6)), ([2, 1, 1], (6, 5, 4)), ([2, 2, 1], (7, 6, 5)), ([3, 2, 1], (9, 4, 5)),
         ([2, 2, 2], (5, 6, 7)), ([3, 2, 2], (7, 5, 4))]


@pytest.mark.parametrize("dims, grid", GRIDS)
@pytest.mark.parametrize("neighbours, width", [(26, 1), (6, 1), (26, 2)])
def test_every_ghost_arrives_from_its_owner(dims, grid, neighbours, width):
    params = _halo(global_grid=grid, neighbours=neighbours, halo_width=width)
    assert all(verdict == (-1, 0) for verdict in _exchange(params, dims))


def test_weak_scaling_layout_checks_out():
    params = _halo(global_grid=(3, 4, 5), weak=True)
    assert all(verdict == (-1, 0) for verdict in _exchange(params, [2, 2, 1]))


def _first_message_of_rank0(sent):
    return next(key for key in sorted(sent) if key[0] == 0 and sent[key].size > 3)


@pytest.mark.parametrize("change, what", [
    (lambda msg: msg.__setitem__(msg.size // 2, msg[msg.size // 2] + 1.0), 2),  # checksum
    (lambda msg: msg.__setitem__(slice(1, 3), msg[2:0:-1].copy()), 3),  # two values swapped
    (lambda msg: msg.__setitem__(msg.size // 2, np.nan), 1),  # missing
    (lambda msg: msg.__setitem__(msg.size // 2, msg[msg.size // 2] + 0.5), 1),  # not a whole stamp
    (lambda msg: msg.__setitem__(msg.size // 2, -7.0), 1),  # below any stamp
])
def test_a_wrong_value_is_caught(change, what):
    params = _halo(global_grid=(6, 5, 4))

    def tamper(sent):
        change(sent[_first_message_of_rank0(sent)])

    verdicts = _exchange(params, [2, 1, 1], tamper=tamper)
    assert [verdict for verdict in verdicts if verdict[0] >= 0][0][1] == what


def test_a_stale_message_is_caught():
    params = _halo(global_grid=(6, 5, 4))
    rank_of = _rank_of([2, 1, 1])
    layout = halo.Layout(params, [2, 1, 1], [0, 0, 0], rank_of)
    # everything right, but stamped one step earlier than the receiver expects
    stale = _exchange(params, [2, 1, 1], step=4,
                      tamper=lambda sent: sent.update({k: v - layout.nranks * layout.ncells
                                                       for k, v in sent.items()}))
    assert all(verdict[0] >= 0 for verdict in stale)


def test_the_classic_pairing_bug_is_caught():
    # receiving with the tag of our own direction (not the opposite one) pairs +x with -x when
    # both neighbours are the same rank; the checks must notice
    params = _halo(global_grid=(6, 5, 4))
    verdicts = _exchange(params, [2, 1, 1], recv_tag=lambda lay, m: m)
    assert any(verdict[0] >= 0 for verdict in verdicts)


def test_halo_timeout_grows_with_steps():
    assert 0 < halo.default_timeout(_halo(steps=10), 2) < halo.default_timeout(_halo(steps=10**6), 2)
