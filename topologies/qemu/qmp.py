"""A QEMU Machine Protocol client over a guest's unix socket: just enough to ask what the guest is and where its
vCPUs run (query-cpus-fast, query-kvm, query-version). JSON lines both ways; events are skipped."""

import json
import socket

from vnetbench.core.errors import LaunchError


class Qmp:
    def __init__(self, path: str, timeout: float = 10.0):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
            self.file = self.sock.makefile("rwb")
            self._read()  # the greeting
            self.command("qmp_capabilities")
        except (OSError, ValueError) as exc:
            self.close()
            raise LaunchError(f"QMP {path}: {exc}") from exc

    def _read(self) -> dict:
        line = self.file.readline()
        if not line:
            raise LaunchError(f"QMP {self.path}: QEMU closed the connection")
        return json.loads(line)

    def command(self, name: str, **arguments):
        message = {"execute": name, **({"arguments": arguments} if arguments else {})}
        try:
            self.file.write(json.dumps(message).encode() + b"\n")
            self.file.flush()
            while True:
                reply = self._read()
                if "return" in reply:
                    return reply["return"]
                if "error" in reply:
                    raise LaunchError(f"QMP {name}: {reply['error'].get('desc', reply['error'])}")
        except (OSError, ValueError) as exc:
            raise LaunchError(f"QMP {self.path}: {name}: {exc}") from exc

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
