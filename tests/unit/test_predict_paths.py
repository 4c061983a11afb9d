"""Path classification (vnetbench.predict.paths): presets and a topology file this host cannot build, from the spec
and the launch's placement alone."""

from vnetbench.predict import paths


def keys(ref, ranks):
    return {pair: path.key for pair, path in paths.classify(paths.load_topology(ref), ranks).items()}


def test_presets():
    assert set(keys("native", 4).values()) == {"host"}
    assert keys("2vm-1vswitch", 2) == {(0, 1): "switch/netns/bridge"}
    assert keys("2vm-2vswitch", 2) == {(0, 1): "uplink/netns/bridge/1gbit"}
    # block placement: ranks 0, 1 in vm1, ranks 2, 3 in vm2
    assert keys("2vm-2vswitch", 4) == {(0, 1): "vm/netns", (2, 3): "vm/netns", (0, 2): "uplink/netns/bridge/1gbit",
                                       (0, 3): "uplink/netns/bridge/1gbit", (1, 2): "uplink/netns/bridge/1gbit",
                                       (1, 3): "uplink/netns/bridge/1gbit"}
    assert set(keys("4vm-4vswitch", 4).values()) == {"uplink/netns/bridge/1gbit"}
    assert keys("switch:ovs:2vm-1vswitch", 2) == {(0, 1): "switch/netns/ovs-auto"}


def test_what_calibrate_measures():
    assert {k: v[0] for k, v in paths.representatives(paths.load_topology("native")).items()} == {"host": 2}
    assert {k: v[0] for k, v in paths.representatives(paths.load_topology("2vm-2vswitch")).items()} == {
        "uplink/netns/bridge/1gbit": 2}


def test_a_topology_file_this_host_cannot_build(tmp_path):
    spec = tmp_path / "four.yaml"
    spec.write_text("""\
name: four-hosts
backend: netns
switches:
  - {name: sw1, uplink: {rate: 10gbit}}
  - {name: sw2, uplink: {rate: 10gbit}}
  - {name: sw3, kind: ovs, datapath: netdev, uplink: {rate: 1gbit, delay: 50us}}
  - {name: sw4, uplink: {rate: 10gbit}}
vms:
  - {name: h1, vcpus: 64, memory: 256GB, switch: sw1}
  - {name: h2, vcpus: 64, memory: 256GB, switch: sw2}
  - {name: h3, vcpus: 64, memory: 256GB, switch: sw3}
  - {name: h4, vcpus: 64, memory: 256GB, switch: sw4}
placement: round-robin
""")
    found = keys(str(spec), 8)
    assert found[(0, 4)] == "vm/netns"  # round-robin: ranks 0 and 4 on h1
    assert found[(0, 1)] == "uplink/netns/bridge/10gbit"
    assert found[(0, 2)] == "uplink/netns/bridge+ovs-netdev/1gbit+50us"  # the slower uplink, both delays
    path = paths.classify(paths.load_topology(str(spec)), 8)[(1, 2)]
    assert (path.kind, path.rate, path.delay_us, path.switch_kinds) == ("uplink", 10**9, 50, ("bridge", "ovs-netdev"))
    assert path.describe() == "across uplinks at 1gbit +50 us (bridge/ovs-netdev)"
