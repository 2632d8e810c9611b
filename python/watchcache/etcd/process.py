"""Starting and stopping real etcd processes on loopback: the embedded default of
``watchcache serve`` and the test fixtures (one member or a cluster).

Every process is tracked by its PID and stopped by it; a cluster member can be killed
(``kill -9``) and restarted on the same ports and data dir to test failover.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ETCD_BINARY_ENV = "WATCHCACHE_ETCD"


class EtcdProcessError(RuntimeError):
    """etcd could not be found, started or did not become healthy in time."""


def project_root() -> Path | None:
    """The source checkout this package runs from (editable install), if any."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "scripts" / "install-etcd.sh").is_file():
            return parent
    return None


def find_etcd_binary(suite: str = "trixie", *, install: bool = True) -> Path:
    """The etcd binary: ``$WATCHCACHE_ETCD``, the project's ``.deps/etcd-<suite>``
    (installed by scripts/install-etcd.sh on demand), or ``etcd`` on PATH."""
    configured = os.environ.get(ETCD_BINARY_ENV)
    if configured and suite == "trixie":
        return Path(configured)
    root = project_root()
    if root is not None:
        candidate = root / ".deps" / f"etcd-{suite}" / "bin" / "etcd"
        if not candidate.is_file() and install:
            subprocess.run(
                [str(root / "scripts" / "install-etcd.sh"), suite],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        if candidate.is_file():
            return candidate
    on_path = shutil.which("etcd")
    if on_path and suite == "trixie":
        return Path(on_path)
    raise EtcdProcessError(
        f"no etcd binary for {suite!r}: run scripts/install-etcd.sh or set ${ETCD_BINARY_ENV}"
    )


def die_with_parent_prefix() -> list[str]:
    """A command prefix that makes the child get SIGKILL when the thread that started it dies.

    util-linux's ``setpriv`` sets the parent-death signal and then execs the real command,
    which keeps its PID. A ``preexec_fn`` would do the same from Python, but it makes
    ``subprocess`` fork instead of vfork and run interpreter code in the child; with gRPC's
    threads alive that child has crashed in gRPC's fork handlers and deadlocked on an
    allocator lock held at the fork. Empty when ``setpriv`` is missing: the child is then
    only stopped by PID.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []


def free_ports(count: int) -> list[int]:
    """Loopback ports free right now (all held open together so they are distinct)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class EtcdMember:
    """One etcd process: its name, ports, data dir and (while running) PID."""

    binary: Path
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    initial_cluster: str = ""
    cluster_token: str = "watchcache"
    extra_args: Sequence[str] = ()
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        cluster = self.initial_cluster or f"{self.name}={self.peer_url}"
        return [
            str(self.binary),
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            self.url,
            "--advertise-client-urls",
            self.url,
            "--listen-peer-urls",
            self.peer_url,
            "--initial-advertise-peer-urls",
            self.peer_url,
            "--initial-cluster",
            cluster,
            "--initial-cluster-token",
            self.cluster_token,
            # A restarted member rejoins with its data dir; "new" is ignored then.
            "--initial-cluster-state",
            "new",
            "--log-level",
            "warn",
            *self.extra_args,
        ]

    def start(self) -> None:
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_path or self.data_dir.parent / f"{self.name}.log"
        # From the main thread, etcd also dies with this process (even on SIGKILL), so a
        # killed test run or server leaves no orphan. Not from other threads: the signal
        # follows the *thread* that started the child, and pool threads come and go.
        on_main_thread = threading.current_thread() is threading.main_thread()
        prefix = die_with_parent_prefix() if on_main_thread else []
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*prefix, *self.command()],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def stop(self, *, kill: bool = False, timeout: float = 10.0) -> None:
        """Stop by PID: SIGTERM (or SIGKILL with ``kill``), then SIGKILL after ``timeout``."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait()
        self.process = None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1.0) as response:
                body = json.loads(response.read() or b"{}")
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return str(body.get("health")) == "true"

    def version(self) -> str:
        with urllib.request.urlopen(f"{self.url}/version", timeout=2.0) as response:
            return str(json.loads(response.read())["etcdserver"])

    def log_tail(self, lines: int = 20) -> str:
        log_path = self.log_path or self.data_dir.parent / f"{self.name}.log"
        try:
            return "\n".join(log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class EtcdCluster:
    """``size`` etcd members on free loopback ports under one temporary folder.

    Use as a context manager: members start on enter and are stopped by PID on exit,
    and the folder is removed, whatever happened in between.
    """

    def __init__(
        self,
        size: int = 1,
        *,
        binary: Path | None = None,
        suite: str = "trixie",
        base_dir: Path | None = None,
        extra_args: Sequence[str] = (),
        start_timeout: float = 30.0,
        ports: Sequence[int] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("an etcd cluster needs at least one member")
        if ports is not None and len(ports) != 2 * size:
            raise ValueError(f"{size} members need {2 * size} ports (client, peer each)")
        self.binary = binary or find_etcd_binary(suite)
        self._own_dir = base_dir is None
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix="watchcache-etcd-"))
        self.start_timeout = start_timeout
        ports = list(ports) if ports is not None else free_ports(2 * size)
        token = f"watchcache-{os.getpid()}-{ports[0]}"
        self.members = [
            EtcdMember(
                binary=self.binary,
                name=f"m{i}",
                client_port=ports[2 * i],
                peer_port=ports[2 * i + 1],
                data_dir=self.base_dir / f"m{i}.etcd",
                cluster_token=token,
                extra_args=extra_args,
            )
            for i in range(size)
        ]
        initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            member.initial_cluster = initial_cluster

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def start(self) -> None:
        try:
            for member in self.members:
                member.start()
            self.wait_healthy(self.members)
        except BaseException:
            self.stop()
            raise

    def wait_healthy(self, members: Sequence[EtcdMember], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        pending = list(members)
        while pending:
            for member in list(pending):
                if not member.running:
                    raise EtcdProcessError(
                        f"etcd {member.name} exited while starting:\n{member.log_tail()}"
                    )
                if member.healthy():
                    pending.remove(member)
            if pending and time.monotonic() > deadline:
                names = ", ".join(m.name for m in pending)
                raise EtcdProcessError(
                    f"etcd {names} not healthy after {timeout or self.start_timeout:.0f}s:\n"
                    + pending[0].log_tail()
                )
            if pending:
                time.sleep(0.05)

    def restart(self, member: EtcdMember) -> None:
        member.start()
        self.wait_healthy([member])

    def stop(self) -> None:
        for member in self.members:
            member.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def default_data_dir() -> Path:
    """Where ``watchcache serve`` and ``load`` keep the embedded etcd's data by default: the
    user's data folder (``$XDG_DATA_HOME``, else ``~/.local/share``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "watchcache" / "etcd"


def embedded_etcd(
    data_dir: Path, *, reuse_running: bool = False, quota_backend_bytes: int = 0
) -> EtcdCluster:
    """One etcd member whose data lives in ``data_dir`` across runs (``watchcache serve``
    without ``--etcd``). Its ports are picked once and kept in ``data_dir/ports``: etcd
    records its peer URL in the data, so a restart must listen where it did before.
    ``reuse_running``: the ports may be in use by that same etcd (a ``load`` while a
    ``serve`` runs); the caller checks ``healthy()`` before starting it.
    ``quota_backend_bytes``: etcd's backend quota (0: etcd's default, 2 GiB)."""
    quota = [f"--quota-backend-bytes={quota_backend_bytes}"] if quota_backend_bytes else []
    data_dir.mkdir(parents=True, exist_ok=True)
    ports_file = data_dir / "ports"
    ports: list[int] | None = None
    with contextlib.suppress(OSError, ValueError):
        ports = [int(p) for p in ports_file.read_text().split()]
    if ports is not None and len(ports) == 2 and reuse_running:
        return EtcdCluster(1, base_dir=data_dir, ports=ports, extra_args=quota)
    if ports is None or len(ports) != 2 or not _bindable(ports):
        if (data_dir / "m0.etcd").exists() and ports is not None:
            raise EtcdProcessError(
                f"the embedded etcd's ports {ports} are in use (another watchcache serve on "
                f"{data_dir}?)"
            )
        ports = free_ports(2)
        ports_file.write_text(f"{ports[0]} {ports[1]}\n")
    return EtcdCluster(1, base_dir=data_dir, ports=ports, extra_args=quota)


def _bindable(ports: Sequence[int]) -> bool:
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As etcd's own listeners do, so connections in TIME_WAIT from its last run
            # do not count as "in use".
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True
