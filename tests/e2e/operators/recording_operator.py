"""A kopf operator for the e2e suite: it handles configmaps labelled ``kopf-e2e=yes`` and
records every handler call (one JSON line each) in the file named by ``$RECORD_FILE``, so
the test can check that each handler ran exactly once, and a timer ticks only while the
object exists. Run with ``kopf run --standalone --namespace <ns> <this file>``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import kopf

LABELS = {"kopf-e2e": "yes"}


def record(event: str, name: str) -> None:
    line = json.dumps({"event": event, "name": name, "at": time.time()})
    with Path(os.environ["RECORD_FILE"]).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Events are test_kopf_crds.py's subject; here they would only add writes to wait for.
    settings.posting.enabled = False
    settings.watching.server_timeout = 30


@kopf.on.create("configmaps", labels=LABELS)
def created(name: str, **_: Any) -> None:
    record("create", name)


@kopf.on.update("configmaps", labels=LABELS, field="data")
def updated(name: str, **_: Any) -> None:
    record("update", name)


@kopf.on.delete("configmaps", labels=LABELS)
def deleted(name: str, **_: Any) -> None:
    record("delete", name)


@kopf.timer("configmaps", labels=LABELS, interval=0.5)
def ticked(name: str, **_: Any) -> None:
    record("tick", name)
