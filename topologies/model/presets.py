"""The study's six configurations as topology data, written for its host and scaled to this one.

The study's host had 16 logical cpus and 48 GB; its VMs had 8 vCPUs and 12 GB (one or two
VMs) or 4 vCPUs and 6 GB (four VMs). ``scale_from`` keeps those proportions on any host:
on 2 cpus a 4-VM topology gets 1 vCPU per VM, and its VMs share cores, as a consolidated host's do.
The VM presets are the default VM backend's (``base.DEFAULT_VM_BACKEND``).
"""

from vnetbench.topologies.base import DEFAULT_VM_BACKEND

STUDY_HOST = {"cpus": 16, "memory": "48GB"}
UPLINK = {"rate": "1gbit"}  # one 1 GbE NIC per vSwitch to the physical switch


def _vms(count: int, vcpus: int, memory: str, switches: list[str]) -> list[dict]:
    return [{"name": f"vm{i + 1}", "vcpus": vcpus, "memory": memory, "numa": "packed",
             "switch": switches[i % len(switches)]} for i in range(count)]


def _preset(name: str, description: str, vms: int, switches: int) -> dict:
    per_vm = (8, "12GB") if vms <= 2 else (4, "6GB")
    if switches == 1:
        names = ["vswitch"]
        declared = [{"name": "vswitch"}]
    else:
        names = [f"vswitch{i + 1}" for i in range(switches)]
        declared = [{"name": sw, "uplink": dict(UPLINK)} for sw in names]
    return {
        "name": name,
        "description": description,
        "backend": DEFAULT_VM_BACKEND,
        "scale_from": dict(STUDY_HOST),
        "switches": declared,
        "vms": _vms(vms, *per_vm, names),
        "placement": "block",
    }


PRESETS = {
    "native": {"name": "native", "description": "this host, no VMs: ranks share memory", "backend": "local"},
    "1vm": _preset("1vm", "one VM with half the host's cpus; ranks share memory inside it", 1, 1),
    "2vm-1vswitch": _preset("2vm-1vswitch", "two VMs on one virtual switch: traffic stays in host memory",
                            2, 1),
    "2vm-2vswitch": _preset("2vm-2vswitch", "two VMs, each on its own virtual switch uplinked at 1 Gbit/s "
                                            "to a physical switch", 2, 2),
    "4vm-1vswitch": _preset("4vm-1vswitch", "four VMs on one virtual switch", 4, 1),
    "4vm-4vswitch": _preset("4vm-4vswitch", "four VMs on four virtual switches, each uplinked at 1 Gbit/s: "
                                            "like four hosts", 4, 4),
}
