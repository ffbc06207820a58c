"""A real PostgreSQL server for the tests: initdb + postgres in a temp dir on a loopback port.

Started once per test session by the first test that needs it, stopped when pytest exits.
PostgreSQL refuses to run as root, so under root the server runs as ``nobody`` (the temp dir is
given to it). Each test gets its own Postgres schema (``pg_schema``), so tests never see each
other's tables. WINDOWFIT_POSTGRES_DSN uses an already running server instead;
WINDOWFIT_SKIP_POSTGRES=1 skips these tests, except in CI (``CI=true``), where a missing server
fails them.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from _redis import free_port, stop_server

__all__ = ["PostgresServer", "pg_schema", "postgres_server", "start_postgres_server"]


@dataclass
class PostgresServer:
    dsn: str
    process: subprocess.Popen[bytes] | None
    directory: str | None
    port: int = 0

    def stop(self) -> None:
        stop_server(self.process, self.directory)
        self.directory = None


_SERVER: PostgresServer | None = None


def _binaries() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _missing(reason: str) -> None:
    if os.environ.get("WINDOWFIT_SKIP_POSTGRES") == "1" and os.environ.get("CI") != "true":
        pytest.skip(f"WINDOWFIT_SKIP_POSTGRES=1 ({reason})")
    pytest.fail(
        f"{reason}: the PostgreSQL store tests need a real server (make services installs "
        "it), or set WINDOWFIT_POSTGRES_DSN to a running one",
        pytrace=False,
    )


def start_postgres_server() -> PostgresServer:
    """initdb a fresh cluster in a temp dir and start postgres on 127.0.0.1 (trust auth)."""
    bindir = _binaries()
    if bindir is None:
        _missing("PostgreSQL (initdb, postgres) is not installed")
        raise AssertionError("unreachable")
    as_user: dict[str, Any] = {}
    directory = tempfile.mkdtemp(prefix="windowfit-pg-")
    if os.geteuid() == 0:
        # postgres refuses root: hand the directory to an unprivileged account
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(directory, nobody.pw_uid, nobody.pw_gid)
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    data = os.path.join(directory, "data")
    log = os.path.join(directory, "postgres.log")
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8", "HOME": directory}
    subprocess.run(
        [os.path.join(bindir, "initdb"), "-D", data, "-U", "windowfit", "--auth=trust",
         "-E", "UTF8", "--no-sync"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=directory, env=env,
        **as_user,
    )  # fmt: skip
    last_error = ""
    for _ in range(3):  # the free port may be taken between probing and binding
        port = free_port()
        args = [
            os.path.join(bindir, "postgres"), "-D", data, "-h", "127.0.0.1", "-p", str(port),
            "-k", directory, "-c", "fsync=off", "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off", "-c", "max_connections=200",
        ]  # fmt: skip
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, cwd=directory, env=env, **as_user
            )
        dsn = f"postgresql://windowfit@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if _ready(dsn):
                return PostgresServer(dsn, proc, directory, port)
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        with open(log, encoding="utf-8", errors="replace") as f:
            last_error = f.read()[-2000:]
    shutil.rmtree(directory, ignore_errors=True)
    pytest.fail(f"postgres did not start:\n{last_error}", pytrace=False)


def _ready(dsn: str) -> bool:
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=1).close()
    except psycopg.OperationalError:
        return False
    return True


def shared_postgres() -> PostgresServer:
    global _SERVER
    if _SERVER is None:
        external = os.environ.get("WINDOWFIT_POSTGRES_DSN")
        if external:
            _SERVER = PostgresServer(external, None, None)
        else:
            _SERVER = start_postgres_server()
            atexit.register(_SERVER.stop)
    return _SERVER


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The shared PostgreSQL server."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _missing("psycopg / psycopg-pool are not installed")
    if os.environ.get("WINDOWFIT_SKIP_POSTGRES") == "1" and os.environ.get("CI") != "true":
        pytest.skip("WINDOWFIT_SKIP_POSTGRES=1")
    yield shared_postgres()


@pytest.fixture
def pg_schema() -> str:
    """A fresh Postgres schema name per test (the store creates it)."""
    return f"wft_{uuid.uuid4().hex[:12]}"
