"""``vnetbench topology list|show|up|down|status|cleanup``: topologies, each through its backend.

A topology is a preset name (see ``list``), a YAML file or BACKEND:REF. ``up`` leaves it up until ``down``;
``run`` and ``exec`` bring one up for themselves (or use it if it is up) and take down only what
they brought up. ``cleanup`` removes what crashed runs left behind; ``cleanup --all`` also takes down
topologies brought up with 'up'; neither touches a topology a live run holds (``cleanup --force`` does,
and that run fails). Emulated VMs need root, ip and tc.
"""

import json
import time

from vnetbench.analysis.render import columns
from vnetbench.core.errors import UsageError

from . import COMMANDS, common


DRY_RUN = ("with --vms qemu: print every command bringing it up would run (the switches' and taps' ip and tc "
           "lines, numactl, virtme-run's and QEMU's argv for each guest), starting nothing")


def register(sub):
    parser = sub.add_parser("topology", help=COMMANDS["topology"], description=__doc__.replace("``", ""))
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="the presets, and what is up")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=handle_list)
    show = actions.add_parser("show", help="a topology as it would be used on this host (sizes after scaling)")
    show.add_argument("ref", metavar="NAME|FILE")
    common.add_vms(show)
    show.add_argument("--json", action="store_true", help="print the spec and the plan as JSON")
    show.add_argument("--spec", action="store_true",
                      help="print only the spec, as YAML: a starting point for a file of your own")
    show.add_argument("--dry-run", action="store_true", help=DRY_RUN)
    show.set_defaults(func=handle_show)
    up = actions.add_parser("up", help="bring a topology up and leave it up")
    up.add_argument("ref", metavar="NAME|FILE")
    common.add_vms(up)
    up.add_argument("--dry-run", action="store_true", help=DRY_RUN)
    up.set_defaults(func=handle_up)
    down = actions.add_parser("down", help="take a topology down")
    down.add_argument("ref", metavar="NAME|FILE")
    common.add_vms(down)
    down.set_defaults(func=handle_down)
    status = actions.add_parser("status", help="the topologies that are up, with their age")
    status.add_argument("--json", action="store_true", help="print JSON")
    common.add_switch(status)
    status.set_defaults(func=handle_status)
    cleanup = actions.add_parser("cleanup", help="remove what crashed runs left behind; never a topology that a "
                                                 "live run holds (see --force)")
    cleanup.add_argument("--all", action="store_true", help="also take down topologies brought up with 'up' (not "
                                                            "one that a live run holds)")
    cleanup.add_argument("--force", action="store_true", help="--all, and also the topologies that live runs hold: "
                                                              "those runs fail")
    cleanup.set_defaults(func=handle_cleanup)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def handle_list(args) -> int:
    from vnetbench import topologies
    from vnetbench.topologies.model import presets

    up = {row["name"] for name in topologies.names() for row in topologies.backend(name).status()}
    rows = []
    for name, data in presets.PRESETS.items():
        rows.append({"name": name, "vms": len(data.get("vms", [])), "switches": len(data.get("switches", [])),
                     "uplinks": sum(1 for sw in data.get("switches", []) if sw.get("uplink")),
                     "up": name in up, "description": data.get("description", "")})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(columns(["NAME", "VMS", "SWITCHES", "UPLINKS", "", "DESCRIPTION"],
                 [[r["name"], r["vms"], r["switches"], r["uplinks"], "up" if r["up"] else "", r["description"]]
                  for r in rows]))
    print("\nA YAML file works wherever a name does; 'vnetbench topology show NAME --spec' prints a preset's "
          "spec as YAML, a starting point for your own.")
    return 0


def handle_show(args) -> int:
    from vnetbench import topologies

    topology = topologies.load(common.vm_ref(args, args.ref), what="NAME|FILE")
    backend = topologies.backend(topology.backend)
    if args.dry_run:
        return _dry_run(backend, topology)
    shown = {"spec": topology.to_dict(), "source": topology.source, **backend.preview(topology)}
    if args.spec:
        import yaml

        print(yaml.safe_dump(topology.to_dict(), sort_keys=False), end="")
    elif args.json:
        print(json.dumps(shown, indent=1))
    else:
        title = f"{topology.name} ({topology.source}): {getattr(topology, 'description', '')}".rstrip(": ")
        print("\n".join([title] + [item if isinstance(item, str) else columns(*item)
                                   for item in backend.show(topology, shown)]))
    return 0


def handle_up(args) -> int:
    from vnetbench import topologies

    topology = topologies.load(common.vm_ref(args, args.ref), what="NAME|FILE")
    if args.dry_run:
        return _dry_run(topologies.backend(topology.backend), topology)
    started = time.monotonic()
    lines = topologies.backend(topology.backend).up(topology)
    took = time.monotonic() - started
    first, *rest = lines
    print(first.replace("{took}", f"{took:.2f} s"))
    for line in rest:
        print(f"  {line}")
    return 0


def _dry_run(backend, topology) -> int:
    print("\n".join(backend.dry_run(topology)))
    return 0


def handle_down(args) -> int:
    from vnetbench import topologies

    topology, why = None, None
    args.ref = common.vm_ref(args, args.ref)
    try:
        topology = topologies.load(args.ref, what="NAME|FILE")
    except UsageError as exc:  # a topology up under a name or file that no longer loads is still taken down
        why = exc
    # the loaded topology's own backend first (it knows REF loaded); then any backend that has something up
    # under the name or file REF (a topology up under a name that now loads as another backend's)
    names = topologies.names()
    if topology is not None:
        names = [topology.backend, *(name for name in names if name != topology.backend)]
    for name in names:
        mine = topology is not None and name == topology.backend
        taken = topologies.backend(name).down(args.ref, topology if mine else None)
        if taken:
            print(taken)
            return 0
    if topology is None and why is not None:
        raise why
    shown = topology.name if topology is not None and args.ref.startswith("switch:") else args.ref  # --switch's twin
    print(f"vnetbench: {shown} is not up; nothing to do")
    return 0


def handle_status(args) -> int:
    from vnetbench import topologies

    rows = [row for name in topologies.names() for row in topologies.backend(name).status()]
    if args.switch:  # the topologies with a switch of that kind
        from vnetbench.topologies import switches

        switches.driver(args.switch, "--switch")
        rows = [row for row in rows if any(sw.get("kind", switches.DEFAULT) == args.switch
                                           for sw in row.get("switches") or [] if isinstance(sw, dict))]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print("no vnetbench topology is up")
        return 0
    table = [[row["name"], row.get("backend", ""), row.get("id", ""), row.get("subnet") or "-",
              len(row["vms"]) if isinstance(row.get("vms"), list) else row.get("vms", "-"), _switch_kinds(row),
              _age(row["age_s"]), row["state"]] for row in rows]
    print(columns(["NAME", "BACKEND", "ID", "SUBNET", "VMS", "SWITCHES", "AGE", "STATE"], table))
    return 0


def handle_cleanup(args) -> int:
    from vnetbench.engine import jobs
    from vnetbench import topologies

    from vnetbench.topologies.thishost.lifecycle import held_phrase

    removed = jobs.sweep_orphans()
    kept = []
    for name in topologies.names():
        backend = topologies.backend(name)
        removed += backend.cleanup(everything=args.all or args.force, force=args.force)
        kept += [row for row in backend.status() if row.get("held_by") or row.get("unreadable")]
    for item in removed:
        print(f"removed {item}")
    for row in kept:
        if row.get("unreadable"):
            print(f"kept topology {row['name']} ({row['id']}): {row['state']}")
        else:
            print(f"kept topology {row['name']} ({row['id']}): {held_phrase(row['held_by'])}; 'vnetbench topology "
                  f"cleanup --force' takes it down, and that run fails")
    if not removed and not kept:
        print("nothing to clean up")
    return 0


def _switch_kinds(row: dict) -> str:
    """'2 ovs (netdev)', '1 bridge': a status row's switches by kind."""
    from collections import Counter

    found = Counter(f"{sw.get('kind', 'bridge')}" + (f" ({sw['datapath']})" if sw.get("datapath") else "")
                    for sw in row.get("switches") or [] if isinstance(sw, dict))
    return ", ".join(f"{n} {kind}" for kind, n in found.items()) or "-"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
