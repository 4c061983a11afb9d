"""The netns backend: VMs emulated on this Linux host as network namespaces, on bridges joined by shaped veths.

A VM is a network namespace plus a UTS namespace (its own hostname), a veth into its switch's bridge,
an address on the topology's subnet, and cgroups (cgroups.py: v2 or v1) confining it to its vCPUs and
memory. The switches are the shared fabric (fabric.py): a bridge each; a switch with an uplink joins
the physical-switch bridge over a veth pair shaped by tc tbf both ways (and delayed by netem, when it
has a delay). mpirun runs on the host, with an address on the physical switch (or on the only switch),
like a head node; its daemons reach the VMs through the launch agent (``agent``), which PRRTE calls in
place of ssh. Root, ip and tc are needed.

The parts: ``plan`` (pure: names, addresses, cpus, rank placement, the launch intent), ``life`` (create,
tear down, clean up; the flow around them is lifecycle.py's), ``view`` (``topology show``, the record's
view), ``agent``. A topology's sizes are fitted to this host when it is loaded (sizing.py).

Submodules are imported where they are used: the launch agent imports this package once per VM and
per run, and needs none of them (nor the spec model).
"""

from ..base import LaunchSpec, Realised, register
from ..thishost.lifecycle import OnThisHost


@register("netns")
class NetnsBackend(OnThisHost, Realised):
    """A netns topology that is up: brought up by this object (and torn down by ``close``,
    at exit, and on SIGTERM/SIGINT), or attached to (and then left up)."""

    ranks_share_this_hosts_files = True  # its VMs are namespaces of this host: the same files
    ranks_write_this_hosts_files = True

    # ---- specs --------------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None, host=None):
        """A spec topology whose VMs run on ``host`` (default: this one): at most one host declared, sizes
        scaled from ``scale_from`` and checked against the host."""
        from ..model import sizing

        return sizing.fit(data, source, lines, host,
                          checks=(sizing.one_host("the netns backend emulates VMs on this one host"),))

    # ---- once up ------------------------------------------------------------------------

    def __init__(self, topology):
        from . import plan

        super().__init__(topology)
        self._bring_up(topology)  # lifecycle.Owned: down at close, at exit and on SIGTERM/SIGHUP
        self.layout = plan.Layout.from_dict(self.state["layout"])

    def check_ranks(self, ranks: int) -> None:
        from . import plan

        plan.check_ranks(ranks)

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        from ..thishost import linux
        from . import plan, view

        inodes = {vm.name: linux.netns_inode(vm.netns) for vm in self.layout.vms}
        return plan.launch_spec(self.layout, ranks, bind, enforced=view.enforcement(self.state),
                                netns_inodes={k: v for k, v in inodes.items() if v})

    def own_cpu_seconds(self) -> float | None:
        from ..thishost import cgroups

        return cgroups.usage(self.state.get("cgroup_mode", "v1"), self.state.get("cgroups") or {})

    def health(self) -> tuple[str, list[str]] | None:
        """None while every VM, switch and uplink is as it was brought up; else what broke and
        the VMs it cut off. Cheap (a stat and an ioctl per VM): a job's watch asks every quarter second."""
        from ..thishost import linux

        lay = self.layout
        made = self.state.get("netns_inodes") or {}
        for vm in lay.vms:
            inode = linux.netns_inode(vm.netns)
            if inode is None or made.get(vm.netns, inode) != inode:
                return f"VM {vm.name} lost its network namespace {vm.netns}", [vm.name]
            problem = linux.link_problem(vm.veth) if lay.switch(vm.switch).driver.host_side else None
            if problem:
                return f"VM {vm.name} lost its network: its veth {vm.veth} {problem}", [vm.name]
        return self.fabric_health()

