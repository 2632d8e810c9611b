"""``watchcache serve`` as a user runs it: its own etcd, data kept across restarts, clean
shutdown on Ctrl-C and SIGTERM, no orphaned etcd even when the server is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from watchcache.etcd.process import free_ports


def start_serve(data_dir: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir.parent / "serve.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "watchcache", "serve", "--data-dir", str(data_dir),
             "--port", str(port), "--log-level", "warning", *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
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
    raise AssertionError("serve did not become ready")


def etcd_pids(data_dir: Path) -> list[int]:
    """PIDs of etcd processes whose command line names this data dir."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmdline
            and cmdline[0].endswith(b"/etcd")
            and str(data_dir).encode() in b" ".join(cmdline)
        ):
            found.append(int(entry.name))
    return found


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bytes(response.read())


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_serve_runs_its_own_etcd_and_leaves_nothing_behind(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    data_dir = tmp_path / "data"
    port = free_ports(1)[0]
    url = f"http://127.0.0.1:{port}"
    process = start_serve(data_dir, port, "--demo-configmaps", "20")
    try:
        wait_ready(url, process, tmp_path / "serve.log")
        assert b'"name":"configmap-0000019"' in get(f"{url}/api/v1/configmaps")
        assert len(etcd_pids(data_dir)) == 1
        os.kill(process.pid, stop_signal)
        process.wait(timeout=30)
        deadline = time.monotonic() + 10
        while etcd_pids(data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert etcd_pids(data_dir) == []
        # The data outlives the server: a restart serves the same objects (no second load),
        # on the standard library's event loop this time.
        process = start_serve(data_dir, port, "--loop", "asyncio")
        wait_ready(url, process, tmp_path / "serve.log")
        assert get(f"{url}/api/v1/configmaps").count(b'"kind":"ConfigMap"') == 20
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        for pid in etcd_pids(data_dir):
            os.kill(pid, signal.SIGKILL)


def test_serve_with_an_unreachable_etcd_fails_with_a_clear_message() -> None:
    port = free_ports(1)[0]
    result = subprocess.run(
        [sys.executable, "-m", "watchcache", "serve", "--etcd", "127.0.0.1:1", "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "watchcache serve: error: etcd unavailable at 127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr
