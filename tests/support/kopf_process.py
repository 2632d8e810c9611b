"""kopf for the e2e tests: its peering CRDs, and an operator as its own process
(``python -m kopf run``), pointed at an apiserver by a kubeconfig of its own and stopped by
PID (SIGTERM, then SIGKILL) whatever happens."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

PRESERVED_STATUS: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
}


def crd(
    plural: str,
    kind: str,
    group: str,
    scope: str,
    schema: dict[str, Any],
    *,
    status_subresource: bool = False,
) -> dict[str, Any]:
    """A one-version (v1) CRD."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    **({"subresources": {"status": {}}} if status_subresource else {}),
                }
            ],
        },
    }


#: kopf's peering CRDs, as its documentation has them.
PEERING_CRDS = (
    crd("clusterkopfpeerings", "ClusterKopfPeering", "kopf.dev", "Cluster", PRESERVED_STATUS),
    crd("kopfpeerings", "KopfPeering", "kopf.dev", "Namespaced", PRESERVED_STATUS),
)


def write_kubeconfig(path: Path, server_url: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "e2e", "cluster": {"server": server_url}}],
                "users": [{"name": "e2e", "user": {}}],
                "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
                "current-context": "e2e",
            }
        )
    )
    return path


@contextlib.asynccontextmanager
async def kopf_operator(
    server_url: str,
    operator: Path,
    workdir: Path,
    run_args: Sequence[str],
    env: Mapping[str, str] = {},
) -> AsyncIterator[Path]:
    """Run ``kopf run <run_args> <operator>`` against ``server_url`` with its output in
    ``workdir/kopf.log``; yields that log's path."""
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", server_url)
    log_path = workdir / "kopf.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kopf",
            "run",
            *run_args,
            str(operator),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(workdir),
                "KUBECONFIG": str(kubeconfig),
                **env,
            },
        )
        try:
            yield log_path
        finally:
            await stop(process)


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), 10)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
