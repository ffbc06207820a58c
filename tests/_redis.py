"""A real redis-server for the tests: started once per test session on a free loopback port.

Import the fixtures into a test module (``from _redis import redis_server, redis_url``).
``redis_url`` gives each test its own key prefix via the ``redis_prefix`` fixture, so tests never
see each other's keys. ``redis_cluster`` starts a 3-master Redis Cluster the same way. Set WINDOWFIT_REDIS_URL to use an already running server instead, or
WINDOWFIT_SKIP_REDIS=1 to skip the Redis tests (except in CI, ``CI=true``); otherwise a missing
redis-server FAILS them.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

__all__ = [
    "RedisCluster",
    "RedisServer",
    "redis_cluster",
    "redis_prefix",
    "redis_server",
    "redis_url",
    "start_redis_cluster",
    "start_redis_server",
]


@dataclass
class RedisServer:
    url: str
    process: subprocess.Popen[bytes] | None
    directory: str | None
    args: list[str] | None = None

    def restart(self) -> None:
        """Stop the server (SIGTERM: it flushes its append-only file) and start it again on
        the same port and directory."""
        assert self.process is not None and self.args is not None
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        deadline = time.monotonic() + 15
        while not _ping(port):
            assert time.monotonic() < deadline, "redis-server did not come back"
            time.sleep(0.05)

    def stop(self) -> None:
        stop_server(self.process, self.directory)
        self.directory = None


def stop_server(process: subprocess.Popen[bytes] | None, directory: str | None) -> None:
    """Terminate a test server (SIGTERM, then SIGKILL) and remove its temporary directory."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:  # pragma: no cover
            process.kill()
            process.wait(timeout=10)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


_SERVER: RedisServer | None = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_cluster_port() -> int:
    """A free port for a cluster node: Redis also binds port + 10000 for the cluster bus, so the
    port must be at most 55535 and both must be free (the kernel's ephemeral range goes higher)."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55536)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise RuntimeError("no free port pair (port, port + 10000) below 55536 on 127.0.0.1")


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis_server(*extra: str) -> RedisServer:
    """Start redis-server on 127.0.0.1 with no persistence; everything it writes is in a tmp dir.

    ``extra`` arguments go to redis-server (e.g. ``--cluster-enabled yes``)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server is not installed: the Redis store tests need a real server "
            "(apt-get install redis-server), or set WINDOWFIT_REDIS_URL to a running one, "
            "or WINDOWFIT_SKIP_REDIS=1 to skip them",
            pytrace=False,
        )
    last_error = ""
    for _ in range(3):  # the free port may be taken between probing and binding
        directory = tempfile.mkdtemp(prefix="windowfit-redis-")
        port = free_cluster_port() if "--cluster-enabled" in extra else free_port()
        args: list[str] = [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--protected-mode",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
            "--logfile",
            os.path.join(directory, "redis.log"),
            "--daemonize",
            "no",
            *extra,
        ]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            if _ping(port):
                return RedisServer(f"redis://127.0.0.1:{port}/0", proc, directory, args)
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        try:
            with open(
                os.path.join(directory, "redis.log"), encoding="utf-8", errors="replace"
            ) as f:
                last_error = f.read()[-2000:]
        except OSError:
            last_error = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace")
        shutil.rmtree(directory, ignore_errors=True)
    pytest.fail(f"redis-server did not start:\n{last_error}", pytrace=False)


def _shared_server() -> RedisServer:
    global _SERVER
    if _SERVER is None:
        external = os.environ.get("WINDOWFIT_REDIS_URL")
        if external:
            _SERVER = RedisServer(external, None, None)
        else:
            _SERVER = start_redis_server()
            # several test modules import the fixture; stop the one server when pytest exits
            atexit.register(_SERVER.stop)
    return _SERVER


@dataclass
class RedisCluster:
    """A 3-master Redis Cluster on loopback; ``url`` names one node (clients discover the rest)."""

    url: str
    nodes: list[RedisServer]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


_CLUSTER: RedisCluster | None = None


def start_redis_cluster(masters: int = 3) -> RedisCluster:
    """``masters`` cluster-enabled redis-servers joined by ``redis-cli --cluster create``."""
    nodes = [
        start_redis_server("--cluster-enabled", "yes", "--cluster-node-timeout", "2000")
        for _ in range(masters)
    ]
    cluster = RedisCluster(nodes[0].url, nodes)
    addresses = [n.url.removeprefix("redis://").removesuffix("/0") for n in nodes]
    cli = shutil.which("redis-cli")
    if cli is None:
        cluster.stop()
        pytest.fail("redis-cli is not installed (it comes with redis-server)", pytrace=False)
    created = subprocess.run(
        [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
        capture_output=True,
        timeout=60,
    )
    if created.returncode != 0:
        cluster.stop()
        pytest.fail(f"redis-cli --cluster create failed:\n{created.stdout!r}", pytrace=False)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = [
            subprocess.run(
                [cli, "-h", "127.0.0.1", "-p", a.rsplit(":", 1)[1], "cluster", "info"],
                capture_output=True,
                timeout=10,
            ).stdout
            for a in addresses
        ]
        if all(b"cluster_state:ok" in s for s in states):
            return cluster
        time.sleep(0.1)
    cluster.stop()
    pytest.fail("the Redis Cluster did not reach cluster_state:ok", pytrace=False)


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A shared 3-master Redis Cluster (WINDOWFIT_REDIS_CLUSTER_URL: use a running one)."""
    global _CLUSTER
    if os.environ.get("WINDOWFIT_SKIP_REDIS") == "1" and os.environ.get("CI") != "true":
        pytest.skip("WINDOWFIT_SKIP_REDIS=1")
    if _CLUSTER is None:
        external = os.environ.get("WINDOWFIT_REDIS_CLUSTER_URL")
        if external:
            _CLUSTER = RedisCluster(external, [])
        else:
            _CLUSTER = start_redis_cluster()
            atexit.register(_CLUSTER.stop)
    yield _CLUSTER


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The shared redis-server (skipped only with WINDOWFIT_SKIP_REDIS=1, never in CI)."""
    if os.environ.get("WINDOWFIT_SKIP_REDIS") == "1" and os.environ.get("CI") != "true":
        pytest.skip("WINDOWFIT_SKIP_REDIS=1")
    yield _shared_server()


@pytest.fixture
def redis_prefix() -> str:
    return f"wftest-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url
