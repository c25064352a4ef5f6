"""A worker cut off from PostgreSQL by the network past its lease, then reconnected: the
same outcome as a freeze. The worker runs in a network namespace of its own, joined to
this machine by a veth pair; PostgreSQL listens on 127.0.0.1 only, so the test relays
the worker's connections from the host end of the pair, and the cut is that link going
down (packets dropped, connections left hanging, as in a real partition)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import pytest

import cronwheel
from tests.cluster.conftest import Cluster
from tests.cluster.scenarios import LEASE, RUNS, goes_dark_and_is_fenced_out


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def _taken() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine already has an address in."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True)
    return [
        ipaddress.IPv4Interface(fields[3]).network
        for fields in (line.split() for line in out.stdout.splitlines())
    ]


@dataclass
class Namespace:
    """A network namespace, and the veth pair joining it to this machine: a private /30
    (host end ``.1``, namespace end ``.2``) that reaches nothing but this machine."""

    name: str
    host_dev: str
    host_ip: str
    ns_ip: str

    @property
    def prefix(self) -> list[str]:
        """Run a command inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def cut(self) -> None:
        _ip("link", "set", self.host_dev, "down")

    def restore(self) -> None:
        _ip("link", "set", self.host_dev, "up")


@pytest.fixture
def netns() -> Iterator[Namespace]:
    tag = f"{os.getpid() % 100_000}"
    name = f"cwtest{tag}"
    try:
        _ip("netns", "add", name)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        pytest.skip(
            f"this machine cannot create network namespaces (`ip netns add` failed: {exc}"
            f" {detail.decode(errors='replace').strip()}); the partition test needs root"
        )
    try:
        # A /30 of 10.213.0.0/16 that no address here overlaps; the search starts at one
        # picked by the pid, so that two test sessions at once do not pick the same one.
        taken = _taken()
        nets = list(ipaddress.IPv4Network("10.213.0.0/16").subnets(new_prefix=30))
        start = os.getpid() % len(nets)
        net = next(n for n in nets[start:] + nets[:start] if not any(n.overlaps(t) for t in taken))
        host_ip, ns_ip = (str(h) for h in net.hosts())
        ns = Namespace(name, f"cwh{tag}", host_ip, ns_ip)
        peer = f"cwn{tag}"
        _ip("link", "add", ns.host_dev, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", name)
        _ip("addr", "add", f"{host_ip}/30", "dev", ns.host_dev)
        _ip("link", "set", ns.host_dev, "up")
        _ip("netns", "exec", name, "ip", "addr", "add", f"{ns_ip}/30", "dev", peer)
        _ip("netns", "exec", name, "ip", "link", "set", peer, "up")
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield ns
    finally:
        # Deleting the namespace destroys its end of the pair, and with it the host's.
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", name)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", f"cwh{tag}")


@dataclass
class Relay:
    """Forwards every TCP connection it accepts to ``target``, byte for byte."""

    target: tuple[str, int]
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def serve(self, host: str) -> tuple[asyncio.Server, int]:
        server = await asyncio.start_server(self._connection, host, 0)
        port: int = server.sockets[0].getsockname()[1]
        return server, port

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers += [writer, up_writer]
        for task in (
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ):
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for writer in self.writers:
            writer.close()


@pytest.fixture
async def relayed_db(cluster_db: str, netns: Namespace) -> AsyncIterator[str]:
    """The cluster database's URL as seen from inside the namespace: the relay's address
    on the host end of the pair."""
    parts = urlsplit(cluster_db)
    relay = Relay((parts.hostname or "127.0.0.1", parts.port or 5432))
    server, port = await relay.serve(netns.host_ip)
    user = f"{parts.username}@" if parts.username else ""
    try:
        yield urlunsplit(parts._replace(netloc=f"{user}{netns.host_ip}:{port}"))
    finally:
        server.close()
        await relay.close()
        await server.wait_closed()


@pytest.mark.timeout(300)
async def test_a_cut_off_worker_is_fenced_out_when_it_reconnects(
    cw: cronwheel.JobService, cluster: Cluster, netns: Namespace, relayed_db: str
) -> None:
    cut_off = cluster.worker(
        "cut-off", lease=LEASE, concurrency=RUNS, db=relayed_db, prefix=netns.prefix
    )

    async def cut() -> None:
        netns.cut()

    async def restore() -> None:
        netns.restore()

    times = await goes_dark_and_is_fenced_out(
        cw, cluster, cut_off, cut, restore, cluster.logs.parent / "gate"
    )
    print(
        f"\nworker partition (veth down): its {RUNS} runs rescued {times.rescued:.1f} s and"
        f" finished by another worker {times.finished:.1f} s after the cut (lease {LEASE:g} s);"
        f" reconnected, it was fenced out of all of them within {times.fenced:.2f} s"
    )
