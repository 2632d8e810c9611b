"""A client of the reference implementation of server-side apply: the ``smd-reference``
program (tests/differential/smd_reference/main.go) over structured-merge-diff v4.1.2.

Design note
-----------
The differential tests run every operation through this reference and through watchcache's
own engine and compare the two. Starting a Go process per operation would cost more than the
operations themselves, so one process serves a whole test session: :class:`SmdReference`
starts it once, writes one JSON request per line to its stdin and reads one JSON answer per
line from its stdout, in order (the protocol is described in the Go program). Every request
carries its own schema, live object and managed fields, so answers depend on nothing but the
request, and a failed test cannot leave state behind for the next one.

Answers are read by a background thread into a queue, so a hung or crashed process turns into
a :class:`SmdReferenceError` after ``timeout`` seconds (with the end of its stderr) rather
than a hung test. :meth:`SmdReference.close` ends the process by its PID: stdin closed (it
exits at end of input), then SIGTERM, then SIGKILL; it runs from the fixture's teardown
whatever the tests did. A missing binary, or one built from other Go source than the
working tree's (the install script records the source's SHA-256 beside it), raises
:class:`SmdReferenceMissing`, whose message names ``make smd-reference`` (the differential
tests fail on it rather than skip: ``make test`` builds the binary before running them).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, TypeAlias

__all__ = [
    "DEFAULT_BINARY",
    "Conflict",
    "ManagerEntry",
    "Outcome",
    "SmdReference",
    "SmdReferenceError",
    "SmdReferenceMissing",
]

_ROOT = Path(__file__).resolve().parents[2]
#: Where scripts/install-smd-reference.sh builds the program.
DEFAULT_BINARY = _ROOT / ".deps" / "smd-reference" / "bin" / "smd-reference"
_SOURCE_DIR = _ROOT / "tests" / "differential" / "smd_reference"

#: One manager's managed fields as the protocol carries them: ``fieldsV1`` (the JSON form
#: of a field set), ``apiVersion`` and ``applied`` (whether it came from an apply). Answers
#: add ``fieldsV1JSON``, the library's exact bytes of the set as text; a request may carry
#: that instead of ``fieldsV1``.
ManagerEntry: TypeAlias = dict[str, Any]
Operation: TypeAlias = Literal["apply", "update", "fieldset", "merge"]


def _source_hash() -> str:
    """The SHA-256 of the Go files' contents in name order, as the install script records
    what it built from."""
    digest = hashlib.sha256()
    for path in sorted(_SOURCE_DIR.glob("*.go")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _built_from() -> str | None:
    stamp = DEFAULT_BINARY.with_name(DEFAULT_BINARY.name + ".source")
    try:
        return stamp.read_text().strip()
    except FileNotFoundError:
        return None


class SmdReferenceMissing(RuntimeError):
    """The reference binary is not built (or was built from other source)."""


class SmdReferenceError(RuntimeError):
    """The reference process failed: it exited, hung, or broke the protocol."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """One conflicting field: its manager and the path as the library prints it
    (``.spec.containers[name="a"].image``)."""

    manager: str
    path: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """The reference's answer to one request: exactly one of ``error``, ``conflicts``,
    ``fields_v1`` (a field set, with ``fields_v1_json`` its exact bytes as text) and
    ``object`` (with ``managers`` for apply and update) is meaningful. ``unchanged`` is the
    library's "nothing changed" answer to an apply, in which case ``object`` is the live
    object, as Kubernetes keeps it."""

    object: Any = None
    managers: dict[str, ManagerEntry] | None = None
    unchanged: bool = False
    fields_v1: dict[str, Any] | None = None
    fields_v1_json: str | None = None
    conflicts: tuple[Conflict, ...] | None = None
    error: str | None = None

    @classmethod
    def from_answer(cls, answer: Mapping[str, Any]) -> Outcome:
        if "error" in answer:
            return cls(error=str(answer["error"]))
        if "conflicts" in answer:
            return cls(
                conflicts=tuple(Conflict(c["manager"], c["path"]) for c in answer["conflicts"])
            )
        if "fieldsV1" in answer:
            return cls(fields_v1=answer["fieldsV1"], fields_v1_json=answer["fieldsV1JSON"])
        if "object" not in answer:
            raise SmdReferenceError(f"answer without object, error or conflicts: {answer!r}")
        return cls(
            object=answer["object"],
            managers=answer.get("managers"),
            unchanged=bool(answer.get("unchanged", False)),
        )


_STDERR_LINES = 50


class SmdReference:
    """One running ``smd-reference`` process; a context manager, or :meth:`start` and
    :meth:`close` by hand. Not thread-safe: one request at a time."""

    def __init__(self, binary: Path = DEFAULT_BINARY, *, timeout: float = 30.0) -> None:
        self.binary = binary
        self.timeout = timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        if not os.access(self.binary, os.X_OK):
            raise SmdReferenceMissing(
                f"the reference implementation {self.binary} is not built: run "
                "`make smd-reference` (make test does it)"
            )
        if self.binary == DEFAULT_BINARY and _built_from() != _source_hash():
            raise SmdReferenceMissing(
                f"{self.binary} was built from other Go source than "
                f"{_SOURCE_DIR.relative_to(_ROOT)}: run `make smd-reference`"
            )
        self._process = subprocess.Popen(
            [str(self.binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self._process.stdout is not None and self._process.stderr is not None
        threading.Thread(
            target=self._read_answers, args=(self._process.stdout,), daemon=True
        ).start()
        threading.Thread(
            target=self._read_stderr, args=(self._process.stderr,), daemon=True
        ).start()

    def _read_answers(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._answers.put(line)
        self._answers.put(None)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._stderr.append(line.decode(errors="replace").rstrip())

    def _failure(self, what: str) -> SmdReferenceError:
        tail = "\n".join(self._stderr)
        return SmdReferenceError(f"smd-reference (pid {self.pid}) {what}; stderr:\n{tail}")

    def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Sends one request and returns the decoded answer line."""
        process = self._process
        if process is None or process.stdin is None:
            raise SmdReferenceError("smd-reference is not running (call start() first)")
        line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        try:
            process.stdin.write(line)
            process.stdin.flush()
        except (BrokenPipeError, ValueError) as err:
            raise self._failure(f"does not take requests ({err})") from err
        try:
            answer = self._answers.get(timeout=self.timeout)
        except queue.Empty:
            failure = self._failure(f"gave no answer within {self.timeout} s")
            self.close()
            raise failure from None
        if answer is None:
            raise self._failure(f"exited (status {process.poll()})")
        try:
            decoded = json.loads(answer)
        except json.JSONDecodeError as err:
            raise self._failure(f"answered with a line that is not JSON: {answer!r}") from err
        if not isinstance(decoded, dict):
            raise self._failure(f"answered with a non-object: {answer!r}")
        return decoded

    def _run(
        self,
        op: Operation,
        schema: str,
        type_name: str,
        obj: Any,
        *,
        live: Any = None,
        managers: Mapping[str, ManagerEntry] | None = None,
        manager: str = "",
        force: bool = False,
        version: str = "v1",
    ) -> Outcome:
        return Outcome.from_answer(
            self.request(
                {
                    "schema": schema,
                    "type": type_name,
                    "op": op,
                    "object": obj,
                    "live": live,
                    "managers": dict(managers or {}),
                    "manager": manager,
                    "force": force,
                    "version": version,
                }
            )
        )

    def apply(
        self,
        schema: str,
        type_name: str,
        live: Any,
        config: Any,
        *,
        managers: Mapping[str, ManagerEntry],
        manager: str,
        force: bool = False,
        version: str = "v1",
    ) -> Outcome:
        """``merge.Updater.Apply`` of ``config`` by ``manager`` onto ``live`` (None: no
        object yet), whose fields ``managers`` own."""
        return self._run(
            "apply",
            schema,
            type_name,
            config,
            live=live,
            managers=managers,
            manager=manager,
            force=force,
            version=version,
        )

    def update(
        self,
        schema: str,
        type_name: str,
        live: Any,
        new_object: Any,
        *,
        managers: Mapping[str, ManagerEntry],
        manager: str,
        version: str = "v1",
    ) -> Outcome:
        """``merge.Updater.Update``: ``manager`` replaced ``live`` by ``new_object``."""
        return self._run(
            "update",
            schema,
            type_name,
            new_object,
            live=live,
            managers=managers,
            manager=manager,
            version=version,
        )

    def field_set(self, schema: str, type_name: str, obj: Any) -> Outcome:
        """``TypedValue.ToFieldSet`` of ``obj``, as FieldsV1 JSON."""
        return self._run("fieldset", schema, type_name, obj)

    def merge(self, schema: str, type_name: str, live: Any, obj: Any) -> Outcome:
        """``TypedValue.Merge``: ``obj`` merged onto ``live``."""
        return self._run("merge", schema, type_name, obj, live=live)

    def close(self) -> None:
        """Ends the process by its PID (end of input, then SIGTERM, then SIGKILL)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, sig)
                try:
                    process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> SmdReference:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
