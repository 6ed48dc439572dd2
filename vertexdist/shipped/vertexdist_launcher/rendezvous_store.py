"""torchrun's rendezvous store on the loopback address, when the rendezvous is on this machine.

torch's TCPStore server listens on every interface (`::`, whatever its host name says: the name is only
for clients), and it has no authentication. For a local job (MASTER_ADDR 127.0.0.1, as vertexdist's
local runs and the emulator give it) that would let any host that reaches this machine join or read the
rendezvous. torch takes no bind address, but a TCPStore server may be handed a socket already listening
(`master_listen_fd`), and torchrun's static rendezvous makes its store `multi_tenant`, which reuses a server
this process already runs on the same port. So node 0's launcher starts that server first, on a socket bound
to the loopback address, and torchrun's agent and every worker use it. A MASTER_ADDR that is not loopback (a
real Vertex job, whose nodes are other machines) is left to torch as it is.

User code run with `launcher: python` has no torchrun: a local job's chief runs it as
`python -m vertexdist_launcher.rendezvous_store (-m MODULE | SCRIPT) ARGS` instead (`vertexdist.local.plan`),
which runs the user's code as `python -m MODULE` would. Once that code imports torch (or, where torch is
loaded already, as in a warm pool's fork, when it starts an env:// or tcp:// rendezvous), this holds the
store the same way in the chief's process and sets TORCHELASTIC_USE_AGENT_STORE=True: torch's env:// and
tcp:// rendezvous then make every rank a client of the store at MASTER_ADDR:MASTER_PORT, rank 0 too, in this
process or one it starts. Code that never imports torch keeps the port (a server of its own may bind it).
It starts the rank's health watcher first, as `vertexdist_launcher.watched` does on the other replicas.
"""

from __future__ import annotations

import datetime
import importlib.abc
import importlib.util
import ipaddress
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from . import say

_held: list[Any] = []  # the store (and its server) live as long as this process


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def hold_loopback_store(master_addr: str, port: int, node_rank: int) -> str:
    """Start the rendezvous store on the loopback address where this node hosts it; what went wrong, if
    anything (then torch makes its own store, as without this)."""
    if node_rank != 0 or not _is_loopback(master_addr):
        return ""
    host = "127.0.0.1" if master_addr == "localhost" else master_addr
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
        from torch.distributed import TCPStore

        store = TCPStore(
            host,
            port,
            None,
            True,
            datetime.timedelta(seconds=60),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=sock.fileno(),
        )
    except (OSError, RuntimeError, TypeError) as exc:
        sock.close()
        return (
            f"the rendezvous store could not be held to {host}:{port} ({exc});"
            " torch listens on all interfaces"
        )
    _held.extend([sock, store])
    return ""


AGENT_STORE_VARIABLE = "TORCHELASTIC_USE_AGENT_STORE"  # torch.distributed.rendezvous reads it
_tried: list[bool] = []


def hold_for_user_code(env: Mapping[str, str]) -> dict[str, str]:
    """On a local job's chief: hold the store at MASTER_ADDR:MASTER_PORT and the variables that make torch's
    rendezvous use it; nothing where the address is not loopback or the job's own env already says whether
    to use an agent's store (set TORCHELASTIC_USE_AGENT_STORE to opt out)."""
    addr, port = env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")
    if AGENT_STORE_VARIABLE in env or not port.isdigit() or not _is_loopback(addr):
        return {}
    problem = hold_loopback_store(addr, int(port), 0)
    if problem:
        say(problem, error=True)
        return {}
    return {AGENT_STORE_VARIABLE: str(True)}


def _hold_once() -> None:
    if not _tried:
        _tried.append(True)
        os.environ.update(hold_for_user_code(os.environ))


class _HoldOnTorchImport(importlib.abc.MetaPathFinder):
    """Holds the store as soon as the user's code has imported torch, so processes it starts afterwards
    (`mp.spawn`) inherit the variable; code without torch keeps the port for itself."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                _hold_once()

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _hold_at_rendezvous() -> None:
    """torch is loaded already (a warm pool's fork): hold the store when an env:// or tcp:// rendezvous
    starts in this process."""
    handlers = sys.modules["torch.distributed.rendezvous"]._rendezvous_handlers
    for scheme in ("env", "tcp"):

        def held(url: str, *args: Any, _handler: Any = handlers[scheme], **kwargs: Any) -> Any:
            _hold_once()
            return _handler(url, *args, **kwargs)

        handlers[scheme] = held


def watch_for_torch() -> None:
    """Hold the store once the user's code turns out to use torch."""
    if "torch" not in sys.modules:
        sys.meta_path.insert(0, _HoldOnTorchImport())
    elif "torch.distributed.rendezvous" in sys.modules:
        _hold_at_rendezvous()


def main(argv: Sequence[str]) -> NoReturn:
    """`python -m vertexdist_launcher.rendezvous_store (-m MODULE | SCRIPT) ARGS`: store, then code."""
    from .fork_protocol import end_process, run_as_python
    from .options import LauncherUsageError, parse_target
    from .worker import __file__ as worker_file
    from .worker import run_target

    try:
        target = parse_target(argv)
    except LauncherUsageError as exc:
        print(f"vertexdist_launcher.rendezvous_store: {exc}", file=sys.stderr)
        sys.exit(2)
    from . import health, whole_lines

    whole_lines.install()
    health.start(os.environ)  # the rank's watcher, a daemon thread (vertexdist_launcher.health)
    watch_for_torch()
    end_process(run_as_python(lambda: run_target(target), own_files={__file__, worker_file}))


if __name__ == "__main__":
    main(sys.argv[1:])
