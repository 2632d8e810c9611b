"""The soak script (``make soak``) itself, run for 20 s so ``make test`` exercises it: a
3-member etcd, two ``watchcache serve`` subprocesses with the inconsistency detector on,
random traffic over HTTP, every watch stream validated. Too short to judge RSS growth (the
script says so and leaves that verdict out); everything else must hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parent / "soak.py"


def test_a_short_soak_passes_every_guarantee(tmp_path: Path, seed: int) -> None:
    summary_path = tmp_path / "soak.json"
    env = {**os.environ, "WATCHCACHE_SEED": str(seed % 2**32)}
    try:
        run = subprocess.run(
            [sys.executable, str(SOAK), "--minutes", "0.33", "--json", str(summary_path)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"the soak did not finish in {error.timeout} s:\n{error.stdout!r}")
    print(run.stdout)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    summary = json.loads(summary_path.read_text())
    assert summary["passed"] is True
    assert all(summary["verdicts"].values())
    # The traffic really happened and was checked.
    assert {"create", "update", "patch", "delete"} <= summary["ops"].keys()
    assert any(op.startswith("list consistent") for op in summary["ops"])
    assert summary["lists_checked"] > 0 and summary["list_mismatches"] == []
    watch = summary["watch"]
    assert watch["watchers"] == 8 and watch["events_checked"] > 0
    assert watch["violations"] == [] and watch["lost_events"] == 0
    assert all(lst["equal"] for lst in summary["final_lists"].values())
    # The detector ran on both servers, and found nothing.
    for counts in summary["consistency_checks"].values():
        assert counts.get("success", 0) > 0 and counts.get("failure", 0) == 0
    # RSS was sampled even though 20 s is too short to judge growth.
    assert all(len(rss["samples"]) > 5 for rss in summary["rss"].values())
