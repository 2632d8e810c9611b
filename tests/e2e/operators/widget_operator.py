"""A kopf operator of the CRD-defined ``widgets.example.com`` kind for the e2e suite, run
with peering (not ``--standalone``): it records each handler call in ``$RECORD_FILE``
(one JSON line, with ``$OPERATOR_ID``), posts an Event about each widget it configures,
and returns a value kopf stores in the widget's status."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import kopf


def record(event: str, name: str) -> None:
    line = json.dumps(
        {"event": event, "name": name, "operator": os.environ["OPERATOR_ID"], "at": time.time()}
    )
    with Path(os.environ["RECORD_FILE"]).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.watching.server_timeout = 30
    # Peers are judged dead after this long without a keepalive (the test's patience).
    settings.peering.lifetime = 10


@kopf.on.create("example.com", "v1", "widgets")
def created(name: str, body: kopf.Body, **_: Any) -> dict[str, Any]:
    record("create", name)
    kopf.info(body, reason="Configured", message=f"widget {name} configured")
    return {"configured": True}


@kopf.on.delete("example.com", "v1", "widgets")
def deleted(name: str, **_: Any) -> None:
    record("delete", name)
