"""The local backend: this host itself, no VMs, every rank under the local mpirun (the ``native`` preset).

A YAML topology without VMs is this backend's too (``backend: local``, or no ``vms``); its presets
(``native``) skip the spec model (``from_preset``: ``NativeTopology``).
"""

from vnetbench.core.errors import SpecError, UsageError

from .base import DEFAULT_VM_BACKEND, LaunchSpec, Realised, register
from .launch.binding import binding, check_ranks
from .thishost.host import usable_cpus
from .launch.intent import Intent, one_host_transport


class NativeTopology:
    """A preset of this host (``native``) without the spec model: importing pydantic would cost every
    ``vnetbench run`` a quarter of a second, for a topology that has nothing to validate."""

    FIELDS = ("name", "description", "backend", "placement")

    backend = "local"
    vms = switches = hosts = ()
    scaled: dict = {}

    def __init__(self, preset: dict):
        self.name = preset["name"]
        self.description = preset.get("description", "")
        self.source = f"preset {self.name}"
        # as the model's to_dict gives it: an empty description left out
        self._data = {"version": 1, "name": self.name, **({"description": self.description} if self.description
                                                            else {}),
                      "backend": self.backend, "placement": preset.get("placement", "block")}

    def to_dict(self) -> dict:
        return dict(self._data)


@register("local")
class LocalRealised(Realised):
    """This host as it is: ranks under the local mpirun, bound to cores while they fit."""

    ranks_share_this_hosts_files = True
    ranks_write_this_hosts_files = True

    @classmethod
    def from_data(cls, data: dict, source: str, lines=None, host=None):
        """A spec topology of this host: the spec model, no VMs and no switches (``host``: unused, as this
        backend sizes nothing)."""
        from .model import spec
        from .model.validation import report

        topology = spec.model(data, source, lines)
        problems = spec.check_references(topology)
        for kind in ("vms", "switches"):
            if getattr(topology, kind):
                problems.append(((kind,), f"the local backend runs ranks on this host, without {kind}; "
                                          f"remove them or set backend: {DEFAULT_VM_BACKEND}"))
        if problems:
            raise SpecError(report(source, lines, problems))
        return topology

    @classmethod
    def from_preset(cls, name: str, data: dict):
        """A preset of this host: vnetbench wrote it and it holds nothing the model would check (a preset with
        more than NativeTopology's fields goes through ``from_data``)."""
        if set(data) <= set(NativeTopology.FIELDS):
            return NativeTopology(data)
        return cls.from_data(data, f"preset {name}")

    @classmethod
    def up(cls, topology) -> list[str]:
        raise UsageError(f"topology {topology.name!r} is this host itself (backend local); there is nothing to "
                         f"bring up")

    @classmethod
    def down(cls, ref: str, topology=None) -> str | None:
        if topology is not None and topology.backend == cls.backend:
            raise UsageError(f"topology {topology.name!r} is this host itself; there is nothing to take down")
        return None

    @classmethod
    def show(cls, topology, preview: dict) -> list:
        return ["backend local: ranks run on this host under mpirun, no VMs"]

    @classmethod
    def planned_bind(cls, topology, ranks: int, bind: str | None) -> str | None:
        return binding(ranks, usable_cpus(), bind)[1]["bind"]

    def check_ranks(self, ranks: int) -> None:
        check_ranks(ranks, "is beyond what one host runs")

    def launch(self, ranks: int, bind: str | None = None) -> LaunchSpec:
        self.check_ranks(ranks)
        mca, notes = binding(ranks, usable_cpus(), bind)
        intent = Intent(ranks=ranks, bind=notes["bind"], oversubscribe=notes["oversubscribed"],
                        mca={**one_host_transport(), **mca})
        return LaunchSpec(intent=intent, notes=notes)
