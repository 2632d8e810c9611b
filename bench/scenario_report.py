"""What the scenario scripts (etcd_scenarios.py, apiserver_scenarios.py) share: a result
row, its markdown table, writing the results as JSON, replacing a marked section of
bench/README.md, and the etcd side of the pagination scenarios."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from watchcache.etcd.store import EtcdStore
from watchcache.options import ListOptions
from watchcache.planner import StoreListRequest
from watchcache.tokens import parse_continue
from watchcache.tokens import start_key as token_start


@dataclass
class Row:
    """One measured scenario; ``met`` is None when the row has no target."""

    scenario: str
    n: int
    value: float
    unit: str
    baseline: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


def table(rows: Sequence[Row], count_label: str = "objects") -> str:
    lines = [
        f"| scenario | {count_label} | result | baseline | target | met | notes |",
        "|---|---:|---:|---:|---|:-:|---|",
    ]
    for r in rows:
        base = f"{r.baseline:,.2f} {r.unit}" if r.baseline is not None else "-"
        met = "" if r.met is None else ("yes" if r.met else "no")
        lines.append(
            f"| {r.scenario} | {r.n:,} | {r.value:,.2f} {r.unit} | {base} | {r.target} "
            f"| {met} | {r.note} |"
        )
    return "\n".join(lines)


def splice(readme: str, section: str, begin: str, end: str) -> str:
    """Replace the text from ``begin`` to ``end`` (inclusive) with ``section``, or append."""
    start, stop = readme.find(begin), readme.find(end)
    if start == -1 or stop == -1 or stop < start:
        return readme.rstrip("\n") + "\n\n" + section
    return readme[:start] + section + readme[stop + len(end) :].lstrip("\n")


def publish(
    rows: Sequence[Row],
    *,
    json_path: Path | None,
    readme: Path | None,
    marker: str,
    title: str,
    how: str,
    count_label: str = "objects",
) -> None:
    """Print the table; write ``json_path``; replace the ``marker`` section of ``readme``
    (``<!-- marker:begin -->`` ... ``<!-- marker:end -->``) with ``title``, the command
    line, ``how`` and the table."""
    text = table(rows, count_label)
    print(text)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"argv": sys.argv, "rows": [asdict(r) for r in rows]}
        json_path.write_text(json.dumps(payload, indent=2) + "\n")
    if readme is not None:
        begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
        command = "python " + " ".join(sys.argv)
        section = "\n".join(
            [begin, f"## {title}", "", f"Command: `{command}`; {how}", "", text, end, ""]
        )
        readme.write_text(splice(readme.read_text(), section, begin, end))


async def list_all_from_etcd(store: EtcdStore, prefix: str, list_kind: str, limit: int) -> int:
    """Walk a whole prefix in pages of ``limit`` through the planner's etcd backend,
    following its continue tokens and rendering each page as the apiserver would (the
    "served from etcd" side of the pagination scenarios). Returns the objects read."""
    total, token, revision = 0, "", 0
    while True:
        start = None
        if token:
            parsed = parse_continue(token)
            start, revision = token_start(parsed, prefix), parsed.resource_version
        result = await store.list(
            StoreListRequest(
                key_prefix=prefix,
                token_prefix=prefix[:-1],
                start_key=start,
                revision=revision,
                minimum=0,
                limit=limit,
                selector=None,
                continued=bool(token),
                options=ListOptions(limit=limit),
            )
        )
        result.render(list_kind, "v1")
        total += len(result.items)
        token = result.continue_token
        if not token:
            return total
