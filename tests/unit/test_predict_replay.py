"""The replay (vnetbench.predict.replay) on hand-made event lists whose replayed times are computed by hand, over
costs from a hand-made calibration: every path 1 ms one way and 1 MB/s (a message of s <= 1000 bytes occupies its
path s/1e6 s), an allreduce of two ranks 50 us."""

import pytest

from vnetbench.predict import model, paths, replay
from vnetbench.predict.replay import Event
from vnetbench.topologies.local import NativeTopology

FLAT = [{"bytes": 8, "oneway_us": 1000.0, "bandwidth_mbps": 1.0}, {"bytes": 1 << 20, "oneway_us": 1000.0,
                                                                      "bandwidth_mbps": 1.0}]


def calibration(name="native", paths_=None, allreduce=None):
    return {"run_id": f"cal-{name}", "started_at": "2026-11-29T00:00:00+00:00", "status": "ok",
            "kernel": "calibration",
            "calibration": {"topology": name, "paths": paths_ or {"host": {"sizes": FLAT}},
                            "allreduce": allreduce if allreduce is not None else
                            {"2": {"path": "host", "sizes": [{"bytes": 8, "us": 50.0}, {"bytes": 1 << 20,
                                                                                          "us": 50.0}]}}}}


def costs(ranks=2, own=None):
    return model.Costs(NativeTopology({"name": "native"}), ranks, own or calibration(), [])


def play(events, elapsed, ranks=2):
    return replay.Replay(events, elapsed, costs(ranks)).run()


def test_blocking_ping_pong_waits_for_the_message():
    r0 = [Event("MPI_Send", 1.0, 1.002, sends=((1, 1000, 0, -1),)),
          Event("MPI_Recv", 1.002, 1.5, recvs=((1, 1000, 0, -1),))]
    r1 = [Event("MPI_Recv", 0.1, 1.0, recvs=((0, 1000, 0, -1),)),
          Event("MPI_Send", 1.3, 1.301, sends=((0, 1000, 0, -1),))]
    elapsed, ends, stats = play([r0, r1], [2.0, 1.5])
    # rank 0 sends at 1.0: the path is busy 1 ms, the message arrives at 1.001; rank 1's receive ends then, it
    # computes 0.3 s and answers at 1.301 (sent and arrived at 1.302); rank 0 ends 0.5 s after that reply
    assert ends[1] == pytest.approx(1.302 + (1.5 - 1.301))
    assert ends[0] == pytest.approx(1.302 + 0.5)
    assert elapsed == pytest.approx(1.802)
    assert stats.calls["MPI_Send"]["calls"] == 2 and stats.calls["MPI_Send"]["bytes"] == 2000
    assert stats.paths["host"]["messages"] == 2


def test_nonblocking_transfer_overlaps_the_computation_before_its_wait():
    r0 = [Event("MPI_Isend", 0.0, 0.0001, sends=((1, 500, 5, 0),)),
          Event("MPI_Wait", 0.5, 0.5001, completes=((0, -1, 0),))]
    r1 = [Event("MPI_Irecv", 0.0, 0.0, recvs=((0, 500, 5, 3),)),
          Event("MPI_Wait", 0.2, 0.3, completes=((3, 0, 500),))]
    elapsed, ends, stats = play([r0, r1], [0.6, 0.4])
    assert ends[0] == pytest.approx(0.4999 + 0.0999)  # the Isend left (0.5 ms) long before its Wait
    assert ends[1] == pytest.approx(0.2 + 0.1)  # arrived at 1 ms, the Wait at 0.2 returns at once
    assert stats.paths["host"]["overlapped_s"] == pytest.approx(0.0005 + 0.001)
    assert elapsed == pytest.approx(0.5998)


def test_a_wait_before_the_arrival_waits_for_it():
    r0 = [Event("MPI_Isend", 0.1, 0.1, sends=((1, 8, 0, 0),)), Event("MPI_Wait", 0.1, 0.1, completes=((0, -1, 0),))]
    r1 = [Event("MPI_Irecv", 0.0, 0.0, recvs=((-1, 8, -1, 7),)),  # any source, any tag
          Event("MPI_Wait", 0.05, 0.2, completes=((7, 0, 8),))]
    _, ends, stats = play([r0, r1], [0.1, 0.2])
    assert ends[1] == pytest.approx(0.1 + 1e-3)
    assert ends[0] == pytest.approx(0.1 + 8e-6)  # the Wait returns when 8 bytes left at 1 MB/s
    assert stats.paths["host"]["overlapped_s"] == 0.0  # both Waits began before their transfers ended


def test_messages_on_one_path_queue_behind_each_other():
    r0 = [Event("MPI_Isend", 0.0, 0.0, sends=((1, 1000, 0, 0),)), Event("MPI_Isend", 0.0, 0.0, sends=((1, 1000, 0, 1),)),
          Event("MPI_Waitall", 0.0, 0.0, completes=((0, -1, 0), (1, -1, 0)))]
    r1 = [Event("MPI_Recv", 0.0, 0.0, recvs=((0, 1000, 0, -1),)), Event("MPI_Recv", 0.0, 0.0, recvs=((0, 1000, 0, -1),))]
    _, ends, _ = play([r0, r1], [0.0, 0.0])
    assert ends[0] == pytest.approx(0.002)  # the second starts when the first has left
    assert ends[1] == pytest.approx(0.001 + 1e-3)  # it starts at 0.001 and takes 1 ms


def test_tags_match_as_mpi_matches_them():
    r0 = [Event("MPI_Send", 0.0, 0.0, sends=((1, 8, 1, -1),)), Event("MPI_Send", 0.5, 0.5, sends=((1, 8, 2, -1),))]
    r1 = [Event("MPI_Recv", 0.0, 0.0, recvs=((0, 8, 2, -1),)), Event("MPI_Recv", 0.0, 0.0, recvs=((0, 8, 1, -1),))]
    _, ends, _ = play([r0, r1], [0.5, 0.0])
    assert ends[1] == pytest.approx(0.5 + 8e-6 + 1e-3)  # tag 2 is the later message


def test_a_collective_starts_when_its_last_member_enters():
    r0 = [Event("MPI_Allreduce", 0.2, 0.6, comm=(0, 1), nbytes=8)]
    r1 = [Event("MPI_Allreduce", 0.5, 0.6, comm=(0, 1), nbytes=8)]
    _, ends, stats = play([r0, r1], [1.0, 0.7])
    assert ends[0] == pytest.approx(0.5 + 50e-6 + 0.4)
    assert ends[1] == pytest.approx(0.5 + 50e-6 + 0.1)
    assert stats.paths["host"]["collective_s"] == pytest.approx(100e-6)


def test_local_calls_take_what_they_took():
    _, ends, _ = play([[Event("MPI_Comm_rank", 0.1, 0.3)]], [0.5], ranks=1)
    assert ends == [pytest.approx(0.5)]


def test_a_receive_no_send_matches_is_refused():
    r0 = [Event("MPI_Recv", 0.0, 0.1, recvs=((1, 8, 0, -1),))]
    r1 = [Event("MPI_Recv", 0.0, 0.1, recvs=((0, 8, 0, -1),))]
    with pytest.raises(replay.ReplayError, match="rank 0 at event 0 .MPI_Recv."):
        play([r0, r1], [0.1, 0.1])


def test_the_curve_interpolates_log_log_and_extends_at_the_last_bandwidth():
    curve = model.Curve([{"bytes": 8, "oneway_us": 10.0, "bandwidth_mbps": 1.0},
                         {"bytes": 32, "oneway_us": 40.0, "bandwidth_mbps": 4.0}])
    assert curve.oneway(16) == pytest.approx(20e-6)  # halfway in log size: the geometric mean
    assert curve.oneway(2) == pytest.approx(10e-6)
    assert curve.oneway(32 + 4_000_000) == pytest.approx(40e-6 + 1.0)
    assert curve.occupancy(16) == pytest.approx(16 / 2.5e6)


def test_an_uplink_of_another_rate_is_extrapolated_from_a_measured_one(tmp_path):
    uplink = {"sizes": [{"bytes": 8, "oneway_us": 20.0, "bandwidth_mbps": 1.0},
                        {"bytes": 1 << 20, "oneway_us": 9000.0, "bandwidth_mbps": 118.0}],
              "rate_bps": 1_000_000_000, "delay_us": 0}
    switch = {"sizes": [{"bytes": 8, "oneway_us": 15.0, "bandwidth_mbps": 2.0},
                        {"bytes": 1 << 20, "oneway_us": 800.0, "bandwidth_mbps": 1500.0}]}
    measured = calibration("2vm-2vswitch", {"uplink/netns/bridge/1gbit": uplink}, {})
    one_switch = calibration("2vm-1vswitch", {"switch/netns/bridge": switch}, {})
    measured["run_id"], one_switch["run_id"] = "up1g", "sw"
    target = paths.load_topology(str(_ten_gbit(tmp_path)))
    costs_ = model.Costs(target, 2, None, [measured, one_switch])
    assert costs_.extrapolated and costs_.rests_on == ["up1g", "sw"]
    oneway, occupancy, key = costs_.p2p(0, 1, 1 << 20)
    wire_1g, wire_10g = (1 << 20) * 8 / 1e9, (1 << 20) * 8 / 1e10
    assert key == "uplink/netns/bridge/10gbit"
    # emulated here, a 10 Gbit/s uplink is one switch plus the uplink's extra 5 us (its 8 B time over one switch's)
    # behind a token bucket of 10 Gbit/s and a 2.5 MB burst (2 ms at the rate), of which the payload gets the share
    # the measured 1 Gbit/s uplink streamed: 118 MB/s of 125
    share = 118e6 / 125e6
    assert costs_.buckets[key] == (pytest.approx(1.25e9 * share), int(2_500_000 * share))
    assert oneway == pytest.approx(model.Curve(switch["sizes"]).oneway(1 << 20) + 5e-6)
    assert occupancy == pytest.approx(min((1 << 20) / 1500e6, 800e-6))
    rerated = model.Rerated(model.Curve(uplink["sizes"]), 10**9, 0, 10**10, 0, model.Curve(switch["sizes"]))
    assert rerated.oneway(1 << 20) == pytest.approx(max(800e-6, 9000e-6 + (wire_10g - wire_1g) / share))
    assert rerated.occupancy(1 << 20) == pytest.approx(max((1 << 20) / 1500e6, wire_10g / share))
    # no allreduce table at this path: ceil(log2 2) = 1 exchange of the worst path
    assert costs_.allreduce((0, 1), 8) == pytest.approx(sum(costs_.p2p(0, 1, 8)[:2]))


def _ten_gbit(folder):
    path = folder / "ten.yaml"
    path.write_text("name: ten\nbackend: netns\nswitches:\n  - {name: a, uplink: {rate: 10gbit}}\n"
                    "  - {name: b, uplink: {rate: 10gbit}}\nvms:\n  - {name: h1, vcpus: 1, memory: 1GB, switch: a}\n"
                    "  - {name: h2, vcpus: 1, memory: 1GB, switch: b}\n")
    return path


def test_no_calibration_of_a_switch_kind_is_refused():
    target = paths.load_topology("switch:ovs:2vm-1vswitch")
    with pytest.raises(model.CalibrationError, match="switch/netns/ovs-auto"):
        model.Costs(target, 2, None, [calibration()])


def test_an_uplink_streams_no_faster_than_its_rate_whatever_a_lone_message_did():
    # 64 KiB crossed alone in 100 us (the shaper's burst); a stream of them leaves at 1 Gbit/s: 524 us each
    curve = model.Curve([{"bytes": 8, "oneway_us": 15.0, "bandwidth_mbps": 1.0},
                         {"bytes": 65536, "oneway_us": 100.0, "bandwidth_mbps": 1000.0}], rate_bps=10**9)
    assert curve.oneway(65536) == pytest.approx(100e-6)
    assert curve.occupancy(65536) == pytest.approx(65536 * 8 / 1e9)
    assert model.Curve(FLAT).occupancy(8) == pytest.approx(8e-6)  # no rate: the windowed bandwidth's


def test_a_shaped_uplink_passes_its_burst_then_waits_for_tokens():
    # one switch: 10 us one way, 10 GB/s (100,000 B occupy it 10 us); the uplink's own 8 B time is 15 us (5 us more);
    # 2vm-2vswitch's uplinks: a token bucket of 125 MB/s and a 250,000 B burst
    flat = [{"bytes": 8, "oneway_us": 10.0, "bandwidth_mbps": 1e4}, {"bytes": 1 << 20, "oneway_us": 10.0,
                                                                     "bandwidth_mbps": 1e4}]
    uplink = [{"bytes": 8, "oneway_us": 15.0, "bandwidth_mbps": 1.0}, {"bytes": 1 << 20, "oneway_us": 9000.0,
                                                                       "bandwidth_mbps": 118.0}]
    own = calibration("2vm-2vswitch", {"uplink/netns/bridge/1gbit": {"sizes": uplink, "rate_bps": 10**9}}, {})
    switch = calibration("2vm-1vswitch", {"switch/netns/bridge": {"sizes": flat}}, {})
    costs_ = model.Costs(paths.load_topology("2vm-2vswitch"), 2, own, [switch])
    # the bucket counts the wire's bytes, headers too; messages are payload: it holds what the uplink streamed
    # (118 MB/s of 125, a 236,000 B burst)
    assert costs_.buckets["uplink/netns/bridge/1gbit"] == (pytest.approx(118e6), 236_000)
    r0 = [Event("MPI_Isend", 0.0, 0.0, sends=((1, 100_000, 0, i),)) for i in range(3)]
    r0.append(Event("MPI_Waitall", 0.0, 0.0, completes=tuple((i, -1, 0) for i in range(3))))
    r1 = [Event("MPI_Recv", 0.0, 0.0, recvs=((0, 100_000, 0, -1),)) for _ in range(3)]
    _, ends, _ = replay.Replay([r0, r1], [0.0, 0.0], costs_).run()
    # the first two pass on the burst, 10 us apart; the third finds 36,000 B + 20 us of refill (2,360 B) at 20 us and
    # waits 61,640 B / 118 MB/s = 522.4 us for the rest: it leaves at 542.4 us, is off the path 10 us later,
    # arrives 5 us after that
    wait = (100_000 - (36_000 + 20e-6 * 118e6)) / 118e6
    assert ends[0] == pytest.approx(20e-6 + wait + 10e-6)
    assert ends[1] == pytest.approx(20e-6 + wait + 15e-6)


def test_a_shaper_gives_the_payload_what_the_headers_leave():
    # a stream of 1 MiB messages through a 1 Gbit/s tbf measured 119.4 MB/s: 1448 payload bytes in each 1514-byte
    # frame at a 1500-byte MTU (IP and TCP headers with timestamps: 52 B; Ethernet: 14 B)
    curve = model.Curve([{"bytes": 8, "oneway_us": 15.0, "bandwidth_mbps": 1.0},
                         {"bytes": 1 << 20, "oneway_us": 9000.0, "bandwidth_mbps": 119.4}], rate_bps=10**9)
    assert model.payload_share(curve, 10**9) == pytest.approx(1448 / 1514, rel=2e-3)
    # a path slower than its shaper (its CPU cost limits it) streams what it measured; never above the rate
    assert model.payload_share(curve, 2 * 10**9) == pytest.approx(119.4e6 * 8 / 2e9)
    assert model.payload_share(curve, 10**8) == 1.0


def _ends_costs(bibw_mbps):
    # one switch: 10 us one way at 8 B, 1 MB/s streamed (1,000 B occupy the path 1 ms); both ranks at once carry
    # bibw_mbps together
    rows = [{"bytes": 8, "oneway_us": 10.0, "bandwidth_mbps": 1.0, "bibw_mbps": bibw_mbps},
            {"bytes": 1 << 20, "oneway_us": 10.0 + 1e6 * (1 << 20) / 1e6, "bandwidth_mbps": 1.0,
             "bibw_mbps": bibw_mbps}]
    own = calibration("2vm-1vswitch", {"switch/netns/bridge": {"sizes": rows}}, {})
    return model.Costs(paths.load_topology("2vm-1vswitch"), 2, own, [])


def _exchange(costs_, nbytes=1000):
    both = [[Event("MPI_Irecv", 0.0, 0.0, recvs=((1 - r, nbytes, 0, 0),)),
             Event("MPI_Isend", 0.0, 0.0, sends=((1 - r, nbytes, 0, 1),)),
             Event("MPI_Waitall", 0.0, 0.0, completes=((0, 1 - r, nbytes), (1, -1, nbytes)))] for r in (0, 1)]
    return replay.Replay(both, [0.0, 0.0], costs_).run()[1]


def test_messages_crossing_at_once_take_turns_at_ends_their_cpu_limits():
    # the ends carry 1 MB/s together (both directions' bytes): as much as one direction streams, so each end copies
    # one message at a time - a 1,000 B exchange takes two messages' time; one way streams as measured
    cpu_bound = _ends_costs(1.0)
    assert cpu_bound.endpoint(0, 1, 1000) == pytest.approx(1e-3)
    oneway = cpu_bound.p2p(0, 1, 1000)[0]
    assert max(_exchange(cpu_bound)) == pytest.approx(oneway + 1e-3)
    r0 = [Event("MPI_Send", 0.0, 0.0, sends=((1, 1000, 0, -1),)) for _ in range(3)]
    r1 = [Event("MPI_Recv", 0.0, 0.0, recvs=((0, 1000, 0, -1),)) for _ in range(3)]
    _, ends, _ = replay.Replay([r0, r1], [0.0, 0.0], cpu_bound).run()
    assert ends[1] == pytest.approx(2e-3 + oneway)  # three streamed: 1 ms apart, as without ends


def test_a_full_duplex_path_carries_both_directions_at_once():
    # both directions together twice one's bandwidth: the ends never bind, the exchange takes one message's time
    duplex = _ends_costs(2.0)
    assert duplex.endpoint(0, 1, 1000) == pytest.approx(0.5e-3)
    assert max(_exchange(duplex)) == pytest.approx(duplex.p2p(0, 1, 1000)[0])
    # a calibration without bidirectional bandwidth has no cost at the ends
    assert model.Curve(FLAT).endpoint(1000) == 0.0


def test_an_end_fills_its_free_time_in_pieces():
    ends = replay._Ends()
    assert ends.book(1.0, 1.0) == 2.0
    assert ends.book(0.0, 0.5) == 0.5  # fits before
    assert ends.book(0.0, 0.8) == pytest.approx(2.3)  # 0.5 before 1.0, the other 0.3 after 2.0
    assert ends.book(0.0, 0.1) == pytest.approx(2.4)  # nothing free before 2.3 any more
    assert ends.busy == [[0.0, 2.4]]
