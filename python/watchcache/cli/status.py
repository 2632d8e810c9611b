"""``watchcache status``: what a running apiserver's caches hold, read from its /metrics.

One row per resource: ready, cache resourceVersion, objects, watchers, stored snapshots and
the memory only they keep alive; then the etcd endpoints and their versions.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections import defaultdict

_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
COLUMNS = (
    ("watchcache_ready", "READY"),
    ("apiserver_watch_cache_resource_version", "RV"),
    ("watchcache_objects", "OBJECTS"),
    ("watchcache_watchers", "WATCHERS"),
    ("watchcache_snapshots", "SNAPSHOTS"),
    ("watchcache_snapshot_pinned_bytes", "PINNED"),
)


class StatusUnavailableError(RuntimeError):
    """The server could not be asked."""


def fetch_metrics(server: str, timeout: float = 5.0) -> str:
    url = server.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, OSError) as error:
        raise StatusUnavailableError(f"cannot read {url}: {error}") from None


def summarize(metrics_text: str) -> str:
    rows: dict[str, dict[str, str]] = defaultdict(dict)
    etcd: list[tuple[str, str]] = []
    wanted = dict(COLUMNS)
    for line in metrics_text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if match["name"] == "watchcache_etcd_info":
            etcd.append((labels.get("endpoint", ""), labels.get("version", "")))
        elif match["name"] in wanted:
            resource = labels.get("resource", "")
            rows[resource][wanted[match["name"]]] = _human(match["name"], match["value"])
    header = ["RESOURCE", *(title for _, title in COLUMNS)]
    table = [header] + [[r, *(rows[r].get(t, "-") for t in header[1:])] for r in sorted(rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
    for endpoint, version in etcd:
        lines.append(f"etcd {endpoint}: {version}")
    return "\n".join(line.rstrip() for line in lines)


def _human(name: str, value: str) -> str:
    number = float(value)
    if name == "watchcache_ready":
        return "yes" if number else "no"
    if name.endswith("_bytes"):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if number < 1024 or unit == "GiB":
                return f"{number:.0f} {unit}" if unit == "B" else f"{number:.1f} {unit}"
            number /= 1024
    return f"{number:.0f}"
