"""``--etcd-servers-overrides`` in kube-apiserver's syntax and ``--uncached-resources``:
what they accept, what they refuse (exit code 2, one clear line, no traceback), and the
one etcd client per distinct cluster that ``serve`` opens for them."""

from __future__ import annotations

import contextlib
import re

import pytest

from watchcache.cli import main as cli
from watchcache.cli import serve
from watchcache.cli.placement import (
    EtcdServersOverride,
    PlacementError,
    merge_overrides,
    parse_etcd_servers_overrides,
    parse_resource_names,
)
from watchcache.etcd.client import EtcdError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/events#http://127.0.0.1:2381", [("events", ("127.0.0.1:2381",))]),
        (
            "coordination.k8s.io/leases#http://10.0.0.1:2379;http://10.0.0.2:2379",
            [("leases.coordination.k8s.io", ("10.0.0.1:2379", "10.0.0.2:2379"))],
        ),
        (
            "/events#127.0.0.1:2381,example.com/widgets#http://[::1]:2379/",
            [("events", ("127.0.0.1:2381",)), ("widgets.example.com", ("[::1]:2379",))],
        ),
        (
            "/events#HTTP://etcd-events:2381;http://etcd-events:2381",
            [("events", ("etcd-events:2381",))],
        ),
        ("", []),
    ],
)
def test_kube_syntax_is_accepted(value: str, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    parsed = parse_etcd_servers_overrides(value)
    assert [(o.group_resource, o.servers) for o in parsed] == expected


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("events#http://127.0.0.1:2381", "must be of format: group/resource#servers"),
        ("/events", "must be of format: group/resource#servers"),
        ("/events#a:1#b:2", "must be of format: group/resource#servers"),
        ("apps/v1/deployments#a:1", "must be of format: group/resource#servers"),
        ("/events#http://127.0.0.1:2381,,", "must be of format: group/resource#servers"),
        ("coordination.k8s.io/#a:1", "the resource is empty"),
        ("/Events#a:1", "is not a group/resource"),
        ("/events#", "a server is empty"),
        ("/events#a:1;", "a server is empty"),
        ("/events#127.0.0.1", "is not an etcd URL"),
        ("/events#http://127.0.0.1:2381/path", "is not an etcd URL"),
        ("/events#https://127.0.0.1:2381", "only http:// etcd URLs are supported"),
        ("/events#unix://x:1", "only http:// etcd URLs are supported"),
        ("/events#127.0.0.1:70000", "the port is out of range"),
        ('"/events#a:1', "cannot split"),
    ],
)
def test_bad_overrides_say_what_is_wrong(value: str, why: str) -> None:
    with pytest.raises(PlacementError, match=re.escape(why)):
        parse_etcd_servers_overrides(value)


def test_a_later_override_of_a_resource_wins_as_in_kube() -> None:
    merged = merge_overrides(
        [
            EtcdServersOverride("events", ("a:1",)),
            EtcdServersOverride("leases.coordination.k8s.io", ("b:2",)),
            EtcdServersOverride("events", ("c:3",)),
        ]
    )
    assert merged == {"events": ("c:3",), "leases.coordination.k8s.io": ("b:2",)}


def test_resource_names() -> None:
    assert parse_resource_names("events, leases.coordination.k8s.io,") == {
        "events",
        "leases.coordination.k8s.io",
    }
    with pytest.raises(PlacementError, match="no resource named"):
        parse_resource_names(" , ")
    with pytest.raises(PlacementError, match=re.escape("'coordination.k8s.io/leases' is not a")):
        parse_resource_names("coordination.k8s.io/leases")


def test_the_flags_reach_the_serve_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[serve.ServeOptions] = []

    def run(options: serve.ServeOptions) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr(serve, "run", run)
    code = cli.main(
        [
            "serve",
            "--etcd",
            "127.0.0.1:2379",
            "--etcd-servers-overrides",
            "/events#http://127.0.0.1:2381,coordination.k8s.io/leases#127.0.0.1:2381",
            "--etcd-servers-overrides",
            "/events#127.0.0.1:2391",
            "--uncached-resources",
            "events",
            "--etcd-compaction-interval",
            "1m30s",
            "--check-consistency-every",
            "9.5",
            "--no-list-indexes",
            "--exact-remaining-item-count",
            "--loop",
            "asyncio",
        ]
    )
    assert code == 0
    assert cli.main(["serve"]) == 0
    (options, defaults) = seen
    assert (options.event_loop, defaults.event_loop) == ("asyncio", "uvloop")
    assert (options.compaction_interval, options.check_consistency_every) == (90.0, 9.5)
    assert (options.list_indexes, options.exact_remaining_counts) == (False, True)
    assert options.etcd_overrides == {
        "events": ("127.0.0.1:2391",),
        "leases.coordination.k8s.io": ("127.0.0.1:2381",),
    }
    assert options.uncached_resources == frozenset({"events"})


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--etcd-servers-overrides", "events#http://127.0.0.1:2381"],
            "watchcache serve: error: argument --etcd-servers-overrides: invalid override "
            "'events#http://127.0.0.1:2381': must be of format: group/resource#servers, where "
            "servers are URLs, semicolon separated",
        ),
        (
            ["--etcd-servers-overrides", "/events#https://127.0.0.1:2381"],
            "only http:// etcd URLs are supported",
        ),
        (
            ["--etcd-compaction-interval", "5 minutes"],
            "argument --etcd-compaction-interval: time: unknown unit",
        ),
        (["--etcd-compaction-interval=-5m"], "must be a finite duration, not negative: '-5m'"),
        (
            ["--uncached-resources", "Events"],
            "watchcache serve: error: argument --uncached-resources: 'Events' is not a "
            "resource name",
        ),
    ],
)
def test_bad_flag_values_exit_2_with_one_clear_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


async def test_one_client_per_distinct_cluster_and_all_closed() -> None:
    async with contextlib.AsyncExitStack() as stack:
        default, placed = await serve.open_etcd_clients(
            stack,
            ["http://127.0.0.1:2379", "127.0.0.1:2380"],
            {
                "events": ("127.0.0.1:2381", "127.0.0.1:2382"),
                "leases.coordination.k8s.io": ("127.0.0.1:2382", "127.0.0.1:2381"),
                "widgets.example.com": ("127.0.0.1:2380", "127.0.0.1:2379"),
            },
        )
        assert placed["events"] is placed["leases.coordination.k8s.io"]
        assert placed["events"] is not default
        assert placed["widgets.example.com"] is default  # the default cluster, listed again
        assert placed["events"].endpoints == ["127.0.0.1:2381", "127.0.0.1:2382"]
        clients = [default, placed["events"]]
    for client in clients:
        with pytest.raises(EtcdError, match="closed"):
            client.channel("127.0.0.1:2379")
