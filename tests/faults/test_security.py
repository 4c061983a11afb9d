"""Security of root operations (issue 7), shown on the real tools and the real commands.

1. Recording shims (toolshim.py) first on PATH log every ip, tc, nsenter, unshare, umount and
   hostname call of real ``vnetbench`` commands, then run the real tool: every call is an argv
   list, every name in it (and in every batch line) is one vnetbench makes, and the names a user
   chose reach ip/tc only inside vnetbench's own namespace names.
2. The source never hands a command to a shell; every subprocess call gets an argv list.
3. The launch agent, called as PRRTE calls it, enters only the namespaces and cgroups vnetbench
   made for a VM, and refuses a state file that points anywhere else.
4. A run, native or on emulated VMs, writes nothing outside vnetbench's state directory and the
   store: not in HOME, not in the working directory, not in /tmp, /var/tmp, /dev/shm or /run.
"""

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import vnetbench
from faults import toolshim
from faults.conftest import records, requires_netns

ROOT = Path(__file__).resolve().parents[2]
RUN_DIR = Path("/run/vnetbench")
# a pingpong that takes a second: a few sizes, a few round trips
SHORT_PINGPONG = ["--max-size", "64", "--iterations", "10", "--warmup", "2", "--large-iterations", "2",
                  "--large-warmup", "2", "--bw-iterations", "2", "--window", "2"]

# What an argument may be made of: no whitespace, quotes or shell metacharacters.
SAFE = re.compile(r"[A-Za-z0-9._/:=-]+")
DNS_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
SHELLS = {"sh", "dash", "bash", "zsh", "ksh", "busybox"}
# the words of the ip and tc commands vnetbench uses; any other word must be a name vnetbench made
KEYWORDS = {"-batch", "-", "-force", "-n", "-j", "-4", "netns", "link", "addr", "route", "qdisc", "add", "del",
            "set", "show", "table", "all", "dev", "up", "type", "bridge", "veth", "peer", "name", "master",
            "root", "handle", "parent", "tbf", "netem", "rate", "burst", "latency", "delay", "limit", "arp",
            "off", "index"}
VALUE = re.compile(r"\d+|\d+:\d*|\d+(?:bit|kbit|mbit|gbit)|\d+(?:us|ms|s)|\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?")
IN_VM = {"eth0", "lo"}


@dataclass
class Names:
    """The names vnetbench makes for some topologies (the patterns of plan.py, with their ids)."""

    ids: set = field(default_factory=set)
    netns: dict = field(default_factory=dict)  # namespace -> its VM's UTS namespace path
    hostnames: dict = field(default_factory=dict)  # UTS path -> hostname

    def add(self, topology_name: str, topology_id: str, vms) -> "Names":
        self.ids.add(topology_id)
        for vm in vms:
            uts = f"{RUN_DIR}/{topology_id}/uts/{vm}"
            self.netns[f"vnb-{topology_id}-{vm}"] = uts
            self.hostnames[uts] = f"{topology_name}-{vm}"
        return self

    def link(self, name: str) -> bool:
        ids = "|".join(sorted(self.ids))
        return len(name) <= 15 and re.fullmatch(rf"vnb(?:{ids})(?:s\d+|p|v\d+|u\d+[ab])", name) is not None


def _words_problems(words: list[str], names: Names, in_vm: bool, where: str) -> list[str]:
    problems = []
    for i, word in enumerate(words):
        prev = words[i - 1] if i else ""
        if not SAFE.fullmatch(word):
            problems.append(f"{where}: {word!r} is not a plain word")
            continue
        if prev in ("-n", "-netns") or (prev == "netns" and words[0] != "netns") or (i == 2 and words[0] == "netns"):
            if word not in names.netns:
                problems.append(f"{where}: namespace {word!r} is not vnetbench's")
        elif prev in ("dev", "master", "name") or (i == 2 and words[:2] in (["link", "add"], ["link", "del"])):
            into_vm = words[i + 1:i + 2] == ["netns"] and words[i + 2:i + 3] and words[i + 2] in names.netns
            if not (names.link(word) or (word in IN_VM and (in_vm or into_vm))):
                problems.append(f"{where}: interface {word!r} is not vnetbench's" +
                                (" (outside a VM's namespace)" if word in IN_VM else ""))
        elif word not in KEYWORDS and not VALUE.fullmatch(word):
            problems.append(f"{where}: unexpected word {word!r}")
    return problems


def call_problems(call: dict, names: Names, host: dict) -> list[str]:
    """What is wrong with one logged call: a shell, a word that is not plain, a name that is not ours."""
    argv, tool = call["argv"], call["tool"]
    args, where = argv[1:], " ".join(argv)[:200]
    problems = []
    if call["parent"]["comm"] in SHELLS:
        problems.append(f"{where}: called through a shell: {call['parent']['argv']}")
    if tool == "nsenter":
        # the one shell: the agent runs PRRTE's remote command with /bin/sh -c, as sshd does
        net = args[0].removeprefix("--net=/run/netns/") if args else ""
        if not (len(args) == 5 and args[0].startswith("--net=/run/netns/") and net in names.netns
                and args[1] == f"--uts={names.netns[net]}" and args[2:4] == ["/bin/sh", "-c"] and "prted" in args[4]):
            problems.append(f"{where}: not an entry into a vnetbench VM with PRRTE's daemon command")
        return problems + [f"{where}: {a!r} is not a plain word" for a in args[:2] if not SAFE.fullmatch(a)]
    problems += [f"{where}: {a!r} is not a plain word" for a in args if not SAFE.fullmatch(a)]
    if tool in ("ip", "tc"):
        in_vm = "-n" in args[:-1] and args[args.index("-n") + 1] in names.netns
        if call["netns"] != host["netns"]:
            in_vm = True  # a throwaway namespace of its own (unshare --net: the netem probe)
        problems += _words_problems(args, names, in_vm, where)
        for n, line in enumerate(call.get("stdin", "").splitlines(), 1):
            words = line.split(" ")
            if "" in words or any(c in line for c in "\t\r\v\f"):
                problems.append(f"{where} line {n}: stray whitespace in {line!r}")
            problems += _words_problems([w for w in words if w], names, in_vm, f"{tool} batch line {line!r}")
    elif tool == "unshare":
        uts = args[0].removeprefix("--uts=") if args else ""
        if args[:2] == ["--net", "tc"]:
            pass  # the netem probe; its tc call is logged and checked on its own
        elif not (len(args) == 3 and uts in names.hostnames and os.path.basename(args[1]) == "hostname"
                  and args[2] == names.hostnames[uts] and DNS_LABEL.fullmatch(args[2])):
            problems.append(f"{where}: not a VM's UTS namespace given its hostname")
    elif tool == "hostname":
        if not (len(args) == 1 and args[0] in names.hostnames.values() and DNS_LABEL.fullmatch(args[0])):
            problems.append(f"{where}: not a VM's hostname (a DNS label)")
        if call["utsns"] == host["utsns"]:
            problems.append(f"{where}: sets the host's own hostname")
    elif tool == "umount":
        if not (len(args) == 1 and args[0] in names.hostnames):
            problems.append(f"{where}: unmounts something that is not a VM's UTS namespace")
    return problems


def user_string_problems(call: dict, names: Names, strings: list[str], vm_names: list[str]) -> list[str]:
    """User-chosen names in an ip/tc call: only a VM's name, only inside its namespace name."""
    if call["tool"] not in ("ip", "tc"):
        return []
    words = call["argv"][1:] + call.get("stdin", "").split()
    problems = []
    for word in words:
        for text in strings:
            if text in word and not (text in vm_names and word in names.netns and word.endswith(f"-{text}")):
                problems.append(f"{' '.join(call['argv'])}: the user's {text!r} reaches {call['tool']} in {word!r}")
    return problems


def host_namespaces() -> dict:
    return {"netns": os.stat("/proc/self/ns/net").st_ino, "utsns": os.stat("/proc/self/ns/uts").st_ino}


def topology_id(ref: str) -> str:
    from vnetbench.topologies.model.spec import load_topology

    return load_topology(ref).id


def _longest(make) -> int:
    """The longest name the spec validator accepts where ``make(length)`` puts one."""
    from vnetbench.core.errors import SpecError
    from vnetbench.topologies.model.spec import from_dict

    longest = 0
    for length in range(1, 80):
        try:
            from_dict(make(length))
            longest = length
        except SpecError:
            pass
    return longest


def _name(prefix: str, length: int) -> str:
    name = (prefix + "-0" * length)[:length]
    return name[:-1] + "9" if name.endswith("-") else name


def user_topology(folder: Path) -> tuple[Path, dict]:
    """A spec whose topology, VM and switch names are at the validator's limits: the longest it
    takes, and a one-character VM name. (path, its names)."""
    def spec(topology="t", vm="v", switch="s"):
        return {"name": topology, "vms": [{"name": vm, "vcpus": 1, "memory": "256MB", "switch": switch}],
                "switches": [{"name": switch, "uplink": {"rate": "1gbit"}}]}

    lengths = {"topology": _longest(lambda n: spec(topology="t" * n)), "vm": _longest(lambda n: spec(vm="v" * n)),
               "switch": _longest(lambda n: spec(switch="s" * n))}
    assert min(lengths.values()) > 1, f"the validator takes no names: {lengths}"
    chosen = {"topology": _name("usrtopo", lengths["topology"]), "vms": [_name("usrvm", lengths["vm"]), "7"],
              "switches": [_name("usrswa", lengths["switch"]), _name("usrswb", lengths["switch"])]}
    data = {"name": chosen["topology"], "placement": "round-robin",
            "vms": [{"name": vm, "vcpus": 1, "memory": "256MB", "switch": sw}
                    for vm, sw in zip(chosen["vms"], chosen["switches"])],
            "switches": [{"name": sw, "uplink": {"rate": "1gbit"}} for sw in chosen["switches"]]}
    path = folder / "usr.yaml"
    path.write_text(json.dumps(data, indent=1))  # JSON is YAML
    return path, chosen


# ---- 1. every root command, recorded ------------------------------------------------------

@pytest.fixture
def taken_down():
    """Register topologies (preset names or files); whatever of them is still up at the end goes down."""
    refs = []
    yield refs.append
    for ref in refs:
        vnetbench("topology", "down", ref, timeout=60)


@requires_netns
def test_root_commands_are_argv_lists_of_vnetbench_names(clean_host, tmp_path, taken_down):
    log = tmp_path / "calls.jsonl"
    shims = toolshim.install(tmp_path / "bin", log)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}
    store = tmp_path / "store" / "results.jsonl"
    spec_file, chosen = user_topology(tmp_path)
    usr_id = topology_id(str(spec_file))
    taken_down("2vm-2vswitch")
    taken_down(str(spec_file))

    vnetbench("topology", "up", "2vm-2vswitch", env=env, check=0)
    vnetbench("run", "pingpong", "--topology", "2vm-2vswitch", "--ranks", "2", *SHORT_PINGPONG,
              "--store", store, env=env, check=0)
    vnetbench("topology", "down", "2vm-2vswitch", env=env, check=0)
    vnetbench("topology", "up", spec_file, env=env, check=0)
    vnetbench("run", "pingpong", "--topology", spec_file, "--ranks", "2", *SHORT_PINGPONG,
              "--store", store, env=env, check=0)
    # a crash that lost the state: cleanup finds what is left by vnetbench's names alone
    (RUN_DIR / usr_id / "state.json").unlink()
    cleaned = vnetbench("topology", "cleanup", env=env, check=0)
    assert f"removed namespace vnb-{usr_id}-7" in cleaned.stdout

    assert [r["status"] for r in records(store)] == ["ok", "ok"]
    names = Names().add("2vm-2vswitch", topology_id("2vm-2vswitch"), ["vm1", "vm2"])
    names.add(chosen["topology"], usr_id, chosen["vms"])
    calls = toolshim.calls(log)
    tools = [call["tool"] for call in calls]
    assert set(tools) == set(toolshim.TOOLS), f"not every tool was seen through its shim: {sorted(set(tools))}"
    # both runs entered both of their VMs; both bring-ups named all four VMs
    assert tools.count("nsenter") == 4 and tools.count("hostname") == 4
    host = host_namespaces()
    problems = [p for call in calls for p in call_problems(call, names, host)]
    user_strings = [chosen["topology"], *chosen["switches"], chosen["vms"][0]]
    problems += [p for call in calls for p in user_string_problems(call, names, user_strings, chosen["vms"])]
    assert not problems, "\n".join(problems)
    batches = "\n".join(call.get("stdin", "") for call in calls)
    for expected in (f"netns add vnb-{usr_id}-{chosen['vms'][0]}", "tbf rate 1000000000bit",
                     f"netns del vnb-{usr_id}-7"):
        assert expected in batches


def test_the_shims_run_the_real_tool_even_with_stdin_closed(tmp_path):
    log = tmp_path / "calls.jsonl"
    shims = toolshim.install(tmp_path / "bin", log, tools=("ip",))
    closed = {"preexec_fn": lambda: os.close(0), "capture_output": True, "text": True, "timeout": 30}
    shown = subprocess.run([shims / "ip", "-o", "link", "show", "lo"], **closed)
    batch = subprocess.run([shims / "ip", "-batch", "-"], **closed)
    fed = subprocess.run([shims / "ip", "-batch", "-"], input="link show lo\n", capture_output=True, text=True)
    assert (shown.returncode, batch.returncode, fed.returncode) == (0, 0, 0), shown.stderr + batch.stderr + fed.stderr
    assert ": lo:" in shown.stdout and ": lo:" in fed.stdout
    assert [(c["argv"], c.get("stdin")) for c in toolshim.calls(log)] == [
        (["ip", "-o", "link", "show", "lo"], None), (["ip", "-batch", "-"], ""),
        (["ip", "-batch", "-"], "link show lo\n")]


def test_the_call_checker_finds_what_it_looks_for():
    """The checks above can fail: calls that break each rule, made up, are each found."""
    names = Names().add("t", "abcd", ["vm1"])
    host = {"netns": 1, "utsns": 2}

    def call(argv, stdin=None, parent="python", netns=1, utsns=2):
        made = {"tool": argv[0], "argv": argv, "parent": {"comm": parent, "argv": [parent]}, "netns": netns,
                "utsns": utsns}
        return made if stdin is None else {**made, "stdin": stdin}

    good = [call(["ip", "-batch", "-"], "netns add vnb-abcd-vm1\nlink add vnbabcds0 type bridge\n"
                                        "link add vnbabcdv0 type veth peer name eth0 netns vnb-abcd-vm1\n"),
            call(["ip", "-n", "vnb-abcd-vm1", "-batch", "-"], "addr add 10.0.0.2/24 dev eth0\n"),
            call(["tc", "-batch", "-"],
                 "qdisc add dev vnbabcdu0a root handle 1: tbf rate 1000bit burst 9 latency 20ms\n"),
            call(["hostname", "t-vm1"], utsns=3), call(["umount", "/run/vnetbench/abcd/uts/vm1"])]
    assert [p for c in good for p in call_problems(c, names, host)] == []
    bad = [call(["ip", "link", "del", "eth1"]), call(["ip", "-batch", "-"], "link set dev eth0 up\n"),
           call(["ip", "netns", "add", "foo"]), call(["ip", "-batch", "-"], "link add vnbabcdx type bridge\n"),
           call(["ip", "-batch", "-"], "link  add vnbabcds0 type bridge\n"), call(["ip", "link", "show"], parent="sh"),
           call(["tc", "qdisc", "add", "dev", "vnbabcdu0a;reboot"]), call(["hostname", "t-vm1"]),
           call(["nsenter", "--net=/proc/1/ns/net", "--uts=/run/vnetbench/abcd/uts/vm1", "/bin/sh", "-c", "prted"]),
           call(["unshare", "--uts=/run/vnetbench/abcd/uts/vm1", "/bin/hostname", "t-vm1 x"]),
           call(["umount", "/"])]
    for c in bad:
        assert call_problems(c, names, host), f"not found wrong: {c['argv']} {c.get('stdin', '')!r}"
    leaked = call(["ip", "-batch", "-"], "link add usrsw type bridge\n")
    assert user_string_problems(leaked, names, ["usrsw"], [])


@requires_netns
def test_cleanup_removes_only_names_vnetbench_makes(clean_host):
    """Names with vnetbench's prefix that plan.py never makes (a bridge ``vnb0000sother``, a namespace
    ``vnb-0000-Not.Ours``) are not leftovers of vnetbench's: ``topology cleanup`` must leave them."""
    bridge, space = "vnb0000sother", "vnb-0000-Not.Ours"
    try:
        subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True, capture_output=True)
        subprocess.run(["ip", "netns", "add", space], check=True, capture_output=True)
        cleaned = vnetbench("topology", "cleanup", check=0)
        left = {"bridge": os.path.exists(f"/sys/class/net/{bridge}"),
                "namespace": os.path.exists(f"/run/netns/{space}")}
    finally:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        subprocess.run(["ip", "netns", "del", space], capture_output=True)
    assert left == {"bridge": True, "namespace": True}, \
        f"topology cleanup removed what is not vnetbench's: {cleaned.stdout}"


@requires_netns
@pytest.mark.parametrize("edit", ["netns", "veth", "cgroup"])
def test_down_and_cleanup_refuse_a_state_that_names_what_vnetbench_does_not_make(vms, edit):
    """An edited state file must not turn ``topology down`` or ``cleanup`` into a tool that deletes
    another namespace or interface, or kills the processes of another cgroup."""
    space = "vnbtest-foreign"
    netns_add(space)
    try:
        if edit == "netns":
            vms.set_vm(netns=space)
        elif edit == "veth":
            vms.set_vm(veth="eth0")
        else:
            vms.tamper(lambda st: st["cgroups"].setdefault("cpuset", {}).update(vm1="/sys/fs/cgroup/cpuset"))
        name = vms.state["name"]
        down = vnetbench("topology", "down", name)
        cleanup = vnetbench("topology", "cleanup", "--all")
        assert os.path.exists(f"/run/netns/{space}") and os.path.exists("/sys/class/net/eth0")
    finally:
        subprocess.run(["ip", "netns", "del", space], capture_output=True)
    for proc in (down, cleanup):
        assert proc.returncode == 1, proc.stderr
        assert "names what vnetbench does not make" in proc.stderr and "nothing" in proc.stderr
    assert os.path.exists(vms.path)  # still up: the fixture puts the state back and takes it down


@requires_netns
def test_a_state_another_version_wrote_is_shown_kept_and_refused_in_one_line(vms, tmp_path):
    """A topology another vnetbench version brought up (its state has a field this version does not know): status,
    list and cleanup go on around it and keep it; down and a run on it refuse in one line; nothing of it goes."""
    vms.tamper(lambda st: st["layout"]["switches"][0].update(flavour="of-a-newer-vnetbench"))
    name, netns = vms.state["name"], vms.vm["netns"]
    status = vnetbench("topology", "status", "--json", check=0)
    table = vnetbench("topology", "status", check=0)
    vnetbench("topology", "list", check=0)  # the presets, and which are up: it read every state
    cleanup = vnetbench("topology", "cleanup", "--all", check=0)
    down = vnetbench("topology", "down", name, check=2)
    run = vnetbench("run", "pingpong", "--topology", tmp_path / "agent.yaml", "--ranks", "2", "--store",
                    tmp_path / "s.jsonl", check=2)
    row = next(row for row in json.loads(status.stdout) if row["name"] == name)
    assert "flavour" in row["unreadable"] and "another vnetbench" in row["state"]
    assert any(line.startswith(name) and "another vnetbench" in line for line in table.stdout.splitlines())
    assert f"kept topology {name}" in cleanup.stdout and "removed" not in cleanup.stdout
    for proc in (down, run):
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "another version of vnetbench" in proc.stderr and "flavour" in proc.stderr
    assert os.path.exists(f"/run/netns/{netns}") and os.path.exists(vms.path)
    assert not (tmp_path / "s.jsonl").exists()  # nothing started


# ---- 2. no shell in the source ------------------------------------------------------------

SHELL_CALLS = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput"),
               ("asyncio", "create_subprocess_shell")}
RUNNERS = {("subprocess", name) for name in ("run", "Popen", "call", "check_call", "check_output")}
SEQUENCE_TYPES = {"list", "tuple", "Sequence", "List", "Tuple"}


class ShellCheck:
    """Where one module's source could hand a command to a shell; each problem is 'file:line: what'."""

    def __init__(self, source: str, filename: str):
        self.tree, self.filename = ast.parse(source, filename), filename
        self.parents = {child: node for node in ast.walk(self.tree) for child in ast.iter_child_nodes(node)}
        self.imported = {}  # local name -> module, or (module, attribute)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self.imported.update({a.asname or a.name: a.name for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.module:
                self.imported.update({a.asname or a.name: (node.module, a.name) for a in node.names})
        self.problems, self.runs = [], 0

    def target(self, func) -> tuple | None:
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module = self.imported.get(func.value.id)
            return (module, func.attr) if isinstance(module, str) else None
        if isinstance(func, ast.Name):
            found = self.imported.get(func.id)
            return found if isinstance(found, tuple) else None
        return None

    def check(self) -> list[str]:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            where = f"{self.filename}:{node.lineno}"
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg == "shell" and not (isinstance(value, ast.Constant) and value.value is False):
                    self.problems.append(f"{where}: shell={ast.unparse(keyword.value)}")
            called = self.target(node.func)
            if called in SHELL_CALLS:
                self.problems.append(f"{where}: {'.'.join(called)} runs a shell")
            elif called in RUNNERS:
                self.runs += 1
                argv = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
                if argv is None or not self.listlike(argv, node):
                    self.problems.append(f"{where}: {'.'.join(called)}'s command "
                                         f"{ast.unparse(argv) if argv else '(none)'} is not seen to be an argv list")
        return self.problems

    def scope(self, node):
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return self.tree

    def listlike(self, expr, at, depth=0) -> bool:
        if depth > 4:
            return False
        if isinstance(expr, (ast.List, ast.Tuple, ast.ListComp)):
            return True
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.listlike(expr.left, at, depth + 1) or self.listlike(expr.right, at, depth + 1)
        if isinstance(expr, ast.Call) and getattr(expr.func, "id", None) in {"list", "tuple", "sorted"}:
            return True
        if not isinstance(expr, ast.Name):
            return False
        scope = self.scope(at)
        values = [n.value for n in ast.walk(scope) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
                  and any(isinstance(t, ast.Name) and t.id == expr.id
                          for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
        if values:
            return all(self.listlike(v, v, depth + 1) for v in values)
        if isinstance(scope, ast.FunctionDef):
            params = scope.args.posonlyargs + scope.args.args + scope.args.kwonlyargs
            param = next((p for p in params if p.arg == expr.id), None)
            if param is not None:
                return self.param_listlike(scope, param, depth)
        return False

    def param_listlike(self, function, param, depth) -> bool:
        """A parameter declared a list/tuple, or one every caller in the module passes a list to
        (``f(..., [..])`` or ``Thread(target=f, args=(..., [..]))``)."""
        annotation = param.annotation
        if annotation is not None:
            base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            return name in SEQUENCE_TYPES
        position = [p.arg for p in function.args.posonlyargs + function.args.args].index(param.arg)
        passed = []
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == function.name:
                args = node.args
            elif any(k.arg == "target" and isinstance(k.value, ast.Name) and k.value.id == function.name
                     for k in node.keywords):
                given = next((k.value for k in node.keywords if k.arg == "args"), None)
                args = given.elts if isinstance(given, (ast.Tuple, ast.List)) else []
            else:
                continue
            passed.append(args[position] if position < len(args) else None)
        return bool(passed) and all(a is not None and self.listlike(a, a, depth + 1) for a in passed)


def shell_problems(folders) -> tuple[list[str], int]:
    problems, runs = [], 0
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            check = ShellCheck(path.read_text(), str(path.relative_to(ROOT)))
            problems += check.check()
            runs += check.runs
    return problems, runs


def test_the_source_never_hands_a_command_to_a_shell():
    problems, runs = shell_problems([ROOT / "suite", ROOT / "kernels", ROOT / "topologies"])
    assert not problems, "\n".join(problems)
    assert runs >= 5, f"only {runs} subprocess calls found: is the checker looking at the source?"


@pytest.mark.parametrize("source, phrase", [
    ("import os\nos.system('ip link')", "os.system runs a shell"),
    ("from os import popen as p\np('ls')", "os.popen runs a shell"),
    ("import subprocess\nsubprocess.getoutput('ls')", "subprocess.getoutput runs a shell"),
    ("import subprocess\nsubprocess.run(['ls'], shell=True)", "shell=True"),
    ("import subprocess as sp\nsp.run('ip link add ' + name)", "is not seen to be an argv list"),
    ("import subprocess\ndef f(cmd):\n    subprocess.Popen(cmd)\nf('ls -l')", "is not seen to be an argv list"),
    ("import subprocess\ndef f():\n    cmd = 'ls'\n    subprocess.check_output(cmd)", "is not seen to be an argv list"),
    ("import subprocess\ndef f(cmd: str):\n    subprocess.run(cmd)", "is not seen to be an argv list"),
])
def test_the_shell_checker_finds_what_it_looks_for(source, phrase):
    problems = ShellCheck(source, "x.py").check()
    assert any(phrase in p for p in problems), problems


def test_the_shell_checker_accepts_argv_lists():
    source = ("import subprocess, threading\n"
              "def run(argv: list[str]):\n    subprocess.run(argv)\n"
              "def f(x):\n    argv = ['ip'] + x\n    argv += ['-batch']\n    subprocess.Popen(argv)\n"
              "def g():\n    def reach(name, argv):\n        subprocess.run(argv)\n"
              "    threading.Thread(target=reach, args=('a', ['ssh', 'h', 'true']))\n")
    assert ShellCheck(source, "x.py").check() == []


# ---- 3. the launch agent enters only what vnetbench made -----------------------------------

FOREIGN = "secfaults-foreign"  # a namespace vnetbench did not make (not "vnb...": the host check sees it)


@dataclass
class Up:
    state: dict
    path: Path

    @property
    def vm(self) -> dict:
        return self.state["layout"]["vms"][0]

    def tamper(self, change) -> None:
        """Rewrite the state file, as state.write does, with ``change(state)`` applied."""
        st = json.loads(self.path.read_text())
        change(st)
        tmp = self.path.with_name("state.json.tamper")
        tmp.write_text(json.dumps(st))
        os.replace(tmp, self.path)

    def set_vm(self, **fields) -> None:
        def change(st):
            st["layout"]["vms"][0].update(fields)
        self.tamper(change)


# 2vm-1vswitch's shape under a name of its own: tampering with its state touches no topology another run uses
AGENT_TOPOLOGY = {
    "name": "secfaults-agent", "switches": [{"name": "vswitch"}],
    "vms": [{"name": f"vm{i}", "vcpus": 1, "memory": "256MB", "switch": "vswitch"} for i in (1, 2)]}


@pytest.fixture
def vms(clean_host, tmp_path):
    """Two VMs on one switch, up by the real command; the state file is put back, and they go down, at the end."""
    from vnetbench.topologies.thishost import state

    spec_file = tmp_path / "agent.yaml"
    spec_file.write_text(json.dumps(AGENT_TOPOLOGY))
    try:
        vnetbench("topology", "up", spec_file, check=0)
        st = next(s for s in state.all_states() if s["name"] == AGENT_TOPOLOGY["name"])
        path = RUN_DIR / st["id"] / "state.json"
        original = path.read_text()
    except BaseException:
        vnetbench("topology", "down", spec_file)
        raise
    try:
        yield Up(st, path)
    finally:
        if path.parent.is_dir():  # down removes what the state names: what was made, not what a test wrote
            path.write_text(original)
        vnetbench("topology", "down", spec_file, check=0)


def agent(host: str, command: str = "echo entered") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vnetbench.topologies.netns.agent", "-x", host, command],
                          capture_output=True, text=True, timeout=30)


def assert_refused(proc: subprocess.CompletedProcess, phrase: str) -> None:
    assert (proc.returncode, proc.stdout) == (255, ""), f"not refused: exit {proc.returncode}, {proc.stdout!r}"
    assert proc.stderr.startswith("vnetbench agent: ") and proc.stderr.endswith("; refused\n")
    assert proc.stderr.count("\n") == 1, f"more than one line: {proc.stderr!r}"
    assert phrase in proc.stderr, proc.stderr


def netns_add(name: str) -> int:
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    return os.stat(f"/run/netns/{name}").st_ino


@requires_netns
def test_the_agent_enters_a_vm_it_made(vms):
    st, vm = vms.state, vms.vm
    proc = agent(vm["hostname"], "hostname && readlink /proc/self/ns/net && cat /proc/self/cgroup")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == [vm["hostname"], f"net:[{st['netns_inodes'][vm['netns']]}]"]
    if st["cgroups"].get("cpuset"):
        assert any(line.split(":")[1] == "cpuset" and line.endswith(f"/{vm['netns']}") for line in lines[2:])


@requires_netns
def test_the_agent_refuses_a_host_that_is_no_vm(vms):
    assert_refused(agent("no-such-vm.example.org"), "'no-such-vm.example.org' is not a VM of a vnetbench topology")
    assert_refused(agent(vms.vm["name"]), "is not a VM of a vnetbench topology")  # the VM's name, not its hostname


@requires_netns
def test_the_agent_refuses_a_namespace_vnetbench_did_not_make(vms):
    tid = vms.state["id"]
    ours = f"vnb-{tid}-intruder"
    try:
        # a foreign name, its inode recorded as if vnetbench had: the name alone refuses it
        inode = netns_add(FOREIGN)
        vms.set_vm(netns=FOREIGN)
        vms.tamper(lambda st: st["netns_inodes"].update({FOREIGN: inode}))
        assert_refused(agent(vms.vm["hostname"]), f"'{FOREIGN}' is not the name of a namespace of this topology")
        # a name in vnetbench's pattern that this topology never created (no inode recorded)
        netns_add(ours)
        vms.set_vm(netns=ours)
        assert_refused(agent(vms.vm["hostname"]), f"namespace '{ours}' was not created with the topology")
    finally:
        for name in (FOREIGN, ours):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
    assert not os.path.exists(f"/run/netns/{FOREIGN}")


@requires_netns
def test_the_agent_refuses_a_namespace_made_again_under_the_same_name(vms):
    name = vms.vm["netns"]
    recorded = vms.state["netns_inodes"][name]
    # the namespace vnetbench made is kept alive meanwhile, so the new one cannot reuse its inode
    with open(f"/run/netns/{name}") as pinned:
        assert os.fstat(pinned.fileno()).st_ino == recorded
        subprocess.run(["ip", "netns", "del", name], check=True, capture_output=True)
        again = netns_add(name)
    assert again != recorded
    assert_refused(agent(vms.vm["hostname"]), f"/run/netns/{name} is not the namespace vnetbench created "
                                              f"(inode {again}, created as {recorded})")


@requires_netns
def test_the_agent_refuses_a_topology_without_recorded_namespaces(vms):
    vms.tamper(lambda st: st.pop("netns_inodes"))
    assert_refused(agent(vms.vm["hostname"]), "take it down and bring it up again")


@requires_netns
@pytest.mark.parametrize("netns", ["../../proc/1/ns/net", "foo", "VNB-{id}-vm1", "vnb-{id}-vm1/../../../proc/1/ns/net",
                                   "vnb-{id}-vm1\n", "vnb-0000-vm1", "vnb-{id}-"])
def test_the_agent_refuses_a_namespace_name_that_is_not_vnetbench_s(vms, netns):
    netns = netns.format(id=vms.state["id"])
    real = os.path.join("/run/netns", netns)
    # recorded as if it were made here (its real inode where it exists): only the name can refuse it
    inode = os.stat(real).st_ino if os.path.exists(real) else vms.state["netns_inodes"][vms.vm["netns"]]
    vms.set_vm(netns=netns)
    vms.tamper(lambda st: st["netns_inodes"].update({netns: inode}))
    assert_refused(agent(vms.vm["hostname"]), f"{netns!r} is not the name of a namespace of this topology")


@requires_netns
def test_the_agent_refuses_a_uts_namespace_outside_the_state_directory(vms):
    folder = RUN_DIR / vms.state["id"]
    for uts in ("/proc/1/ns/uts", f"{folder}/../../../proc/1/ns/uts", str(RUN_DIR / "0000" / "uts" / "vm1"), ""):
        vms.set_vm(uts=uts)
        assert_refused(agent(vms.vm["hostname"]),
                       f"its UTS namespace {uts!r} is outside the topology's state directory")
    vms.set_vm(uts=str(folder / "state.json"))
    assert_refused(agent(vms.vm["hostname"]), "is not a UTS namespace")


@requires_netns
def test_the_agent_refuses_a_cgroup_that_is_not_vnetbench_s(vms):
    kinds = [kind for kind, folders in vms.state["cgroups"].items() if folders]
    if not kinds:
        pytest.skip("no cgroup v1 cpuset or memory controller here: the agent joins no cgroups")
    kind, name = kinds[0], vms.vm["name"]
    made = vms.state["cgroups"][kind][name]
    for folder in (str(Path(made).parent), f"{made}/..", "/tmp", f"{made}-x/../vnb-0000-vm1"):
        vms.tamper(lambda st: st["cgroups"][kind].update({name: folder}))
        assert_refused(agent(vms.vm["hostname"]), f"its {kind} cgroup {folder!r} is not a vnetbench cgroup")


# ---- 4. nothing written outside the state directory and the store ------------------------

@requires_netns
def test_a_run_writes_only_to_the_state_directory_and_the_store(clean_host, tmp_path, taken_down):
    home, cwd, store_dir = (tmp_path / name for name in ("home", "cwd", "store"))
    for folder in (home, cwd, store_dir):
        folder.mkdir()
    store = store_dir / "results.jsonl"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("XDG_", "NUMBA_CACHE"))}
    env["HOME"] = str(home)
    run_before = set(os.listdir("/run"))
    ours_before = set(os.listdir(RUN_DIR)) if RUN_DIR.is_dir() else set()
    taken_down("2vm-1vswitch")

    vnetbench("run", "stream", "--ranks", "2", "--array-size", "20000", "--ntimes", "3", "--store", store,
              env=env, cwd=cwd, check=0)
    vnetbench("run", "pingpong", "--topology", "2vm-1vswitch", "--ranks", "2", *SHORT_PINGPONG, "--store", store,
              env=env, cwd=cwd, check=0)

    assert [(r["kernel"], r["status"]) for r in records(store)] == [("stream", "ok"), ("pingpong", "ok")]
    assert sorted(os.listdir(home)) == [], "written in HOME"
    assert sorted(os.listdir(cwd)) == [], "written in the working directory"
    assert {p for p in os.listdir(store_dir) if p != store.name and not p.endswith(".lock")} == set()
    assert set(os.listdir("/run")) - run_before <= {"vnetbench"}, "written in /run"
    # no topology and no job directory is left; a lock file, or an empty folder for jobs, may stay
    ours_after = set(os.listdir(RUN_DIR)) if RUN_DIR.is_dir() else set()
    left = [RUN_DIR / p for p in sorted(ours_after - ours_before) if p != ".lock"]
    assert [str(p) for p in left if not (p.is_dir() and not any(p.iterdir()))] == [], f"left in {RUN_DIR}"
    # /tmp, /var/tmp and /dev/shm, namespaces, mounts, cgroups, processes: clean_host
