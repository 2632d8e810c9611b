"""``watchcache status`` reads a server's /metrics: the summary table and its errors."""

from __future__ import annotations

import pytest

from watchcache.cli import status
from watchcache.cli.main import main

METRICS = """\
# HELP watchcache_etcd_info etcd endpoints and the version each reported.
# TYPE watchcache_etcd_info gauge
watchcache_etcd_info{endpoint="127.0.0.1:2379",version="3.5.16"} 1
apiserver_watch_cache_resource_version{group="",resource="pods"} 42
watchcache_objects{group="",resource="pods"} 7
watchcache_watchers{group="",resource="pods"} 2
watchcache_snapshots{group="",resource="pods"} 3
watchcache_snapshot_pinned_bytes{group="",resource="pods"} 5120
watchcache_ready{group="",resource="pods"} 1
watchcache_ready{group="",resource="configmaps"} 0
"""


def test_summary_has_one_row_per_resource_and_the_etcd_versions() -> None:
    lines = status.summarize(METRICS).splitlines()
    assert lines[0].split() == [
        "RESOURCE",
        "READY",
        "RV",
        "OBJECTS",
        "WATCHERS",
        "SNAPSHOTS",
        "PINNED",
    ]
    assert lines[1].split() == ["configmaps", "no", "-", "-", "-", "-", "-"]
    assert lines[2].split() == ["pods", "yes", "42", "7", "2", "3", "5.0", "KiB"]
    assert lines[3] == "etcd 127.0.0.1:2379: 3.5.16"


def test_status_of_a_server_that_is_not_there_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--server", "http://127.0.0.1:1"]) == 1
    assert "cannot read http://127.0.0.1:1/metrics" in capsys.readouterr().err
