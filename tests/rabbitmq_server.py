"""A throwaway RabbitMQ node on loopback ports, for tests of the queue input.

Uses the machine's own Debian ``rabbitmq-server`` (`make test` installs it with apt when
missing), started directly (not as a service) with everything of its own under a temp dir:
HOME (the Erlang cookie), the Mnesia database, logs, an empty plugin list (no management
listener), a unique node name. Every port is on 127.0.0.1 and free: AMQP
(RABBITMQ_NODE_IP_ADDRESS/PORT), the inter-node port (RABBITMQ_DIST_PORT, bound with
``inet_dist_use_interface``) and a private epmd (ERL_EPMD_ADDRESS/PORT). No rabbitmqctl
either: the CLI would open its own distribution port; readiness is an AMQP login, a stop is
SIGTERM to the node (RabbitMQ shuts down cleanly on it). :meth:`RabbitMQ.stop` also ends
the node's epmd, so nothing is left running.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SERVER_CANDIDATES = ("/usr/lib/rabbitmq/bin/rabbitmq-server",)
START_TIMEOUT_S = 90
#: What a node that lost one of its ports to another process says as it exits.
PORT_TAKEN = ("eaddrinuse", "nodistribution")
STOP_TIMEOUT_S = 60


def find_server() -> str | None:
    for path in SERVER_CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    found = sorted(glob.glob("/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin/rabbitmq-server"), reverse=True)
    return found[0] if found else None


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports: all held open until every one is chosen (a port
    closed at once can be handed out again by the next bind)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _epmd() -> str:
    return shutil.which("epmd") or (sorted(glob.glob("/usr/lib/erlang/erts-*/bin/epmd")) or ["epmd"])[-1]


class RabbitMQ:
    """One node: ``url`` while running; :meth:`restart` keeps its data (durable queues, persistent messages)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.node = f"advisor-{uuid.uuid4().hex[:10]}@localhost"
        self.amqp_port, self.dist_port, self.epmd_port = _free_ports(3)
        self.proc: subprocess.Popen[bytes] | None = None
        for name in ("home", "mnesia", "log"):
            (root / name).mkdir(parents=True, exist_ok=True)
        (root / "enabled_plugins").write_text("[].\n")  # no management plugin, no extra listener
        (root / "rabbitmq.conf").write_text(
            "loopback_users.guest = true\n"
            f"listeners.tcp.1 = 127.0.0.1:{self.amqp_port}\n"
            "disk_free_limit.absolute = 10MB\n")

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    def env(self) -> dict[str, str]:
        root = self.root
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "HOME": str(root / "home"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_MNESIA_BASE": str(root / "mnesia"), "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": str(root / "rabbitmq-env.conf"),  # not /etc/rabbitmq's
            "RABBITMQ_PID_FILE": str(root / "rabbitmq.pid"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(root / "advanced.config"),
            "ERL_CRASH_DUMP": str(root / "erl_crash.dump"),  # a node that fails to start dumps here, not in the checkout
        }

    def start(self) -> None:
        server = find_server()
        if server is None:
            raise RuntimeError("rabbitmq-server is not installed; run `make rabbitmq`")
        (self.root / "rabbitmq-env.conf").touch()
        log = open(self.root / "server.out", "ab")
        # Its own session: the test's Ctrl-C does not reach it; stop() ends it.
        self.proc = subprocess.Popen([server], env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rabbitmq-server exited with {self.proc.returncode}: {self.tail()}")
            if self._accepts_login():
                return
            time.sleep(0.2)
        raise RuntimeError(f"rabbitmq-server did not accept a login within {START_TIMEOUT_S} s: {self.tail()}")

    def _accepts_login(self) -> bool:
        import pika

        try:
            pika.BlockingConnection(pika.URLParameters(self.url + "?connection_attempts=1&socket_timeout=1")).close()
            return True
        except Exception:
            return False

    def tail(self) -> str:
        text = (self.root / "server.out").read_text(errors="replace") if (self.root / "server.out").exists() else ""
        return " | ".join(text.strip().splitlines()[-8:])

    def pids(self) -> list[int]:
        """The node's processes (the script, beam, its helpers) and its epmd: those whose environment names
        this node's epmd port."""
        marker = f"ERL_EPMD_PORT={self.epmd_port}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def stop(self) -> None:
        """Stop the node (SIGTERM: a clean shutdown that keeps the durable data), then its epmd."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
        # epmd is a daemon of its own (started by the node, left behind by design): end ours. If
        # another process holds the port (the node never started its epmd), nobody answers: the
        # sweep below still ends whatever of ours is left.
        try:
            subprocess.run([_epmd(), "-kill"], env={**self.env(), "ERL_EPMD_PORT": str(self.epmd_port)},
                           capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.pids():  # whatever did not go (a stuck helper): no stray process left
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def restart(self) -> None:
        """Stop and start again on the same ports and data: durable queues and persistent messages survive."""
        self.stop()
        self.start()


@contextmanager
def rabbitmq_server() -> Iterator[RabbitMQ]:
    root = Path(tempfile.mkdtemp(prefix="advisor-rabbitmq-"))
    broker = RabbitMQ(root)
    try:
        for attempt in range(3):
            try:
                broker.start()
                break
            except RuntimeError as error:
                # A port found free can be taken by another process before the node binds it
                # (seen: eaddrinuse on the AMQP port; `nodistribution` when the node's epmd or
                # distribution port was); new ports, a fresh node, once more.
                if not any(sign in str(error) for sign in PORT_TAKEN) or attempt == 2:
                    raise
                broker.stop()
                shutil.rmtree(root, ignore_errors=True)
                root.mkdir()
                broker = RabbitMQ(root)
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def listening_ports(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket (IPv4 and IPv6) held by these processes."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            found.append((_address(address, v6), int(port, 16)))
    return found


def _address(hex_address: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_address)
    if not v6:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc prints IPv6 as four little-endian 32-bit words.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)
