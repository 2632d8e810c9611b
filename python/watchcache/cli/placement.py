"""Where each resource lives, from the command line: kube-apiserver's
``--etcd-servers-overrides`` and the switch that serves a resource from etcd instead of a
watch cache (docs/etcd.md §6).

``--etcd-servers-overrides`` takes kube-apiserver's syntax exactly (its ``EtcdOptions``):
entries separated by commas (a string-slice flag, so the flag may also be repeated and
its values add up), each ``group/resource#servers`` with the servers separated by ``;``
and the core group written as nothing (``/events#http://127.0.0.1:2381``). Like kube, a
later entry for the same resource replaces an earlier one, and an entry for a resource
that is not served is kept (a CRD may define it later). What kube only finds out when it
connects is refused here with a clear message: an empty resource, no servers, or a server
that is not ``[http://]host:port``.

The values are ``group_resource`` names (``events``, ``leases.coordination.k8s.io``), the
names the apiserver places and caches resources by.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

#: kube-apiserver's message for an entry that is not ``group/resource#servers``.
OVERRIDE_FORMAT: Final = (
    "must be of format: group/resource#servers, where servers are URLs, semicolon separated "
    "(the core group is empty: /events#http://127.0.0.1:2381)"
)

# An etcd endpoint as EtcdClient takes it: host:port, with or without a scheme.
_SERVER = re.compile(
    r"(?:(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://)?"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]@]+):(?P<port>[0-9]{1,5})/?"
)
# Resource names are lowercase DNS labels; groups lowercase DNS subdomains.
_GROUP_RESOURCE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class PlacementError(ValueError):
    """A flag value that cannot be used; the message says why, for the command line."""


@dataclass(frozen=True, slots=True)
class EtcdServersOverride:
    """One ``group/resource#servers`` entry: the resource by ``group_resource`` and its
    etcd endpoints as ``host:port``."""

    group_resource: str
    servers: tuple[str, ...]


def group_resource_name(group: str, resource: str) -> str:
    """``<resource>[.<group>]``, as resources are named here (and in kube's
    ``--watch-cache-sizes``)."""
    return f"{resource}.{group}" if group else resource


def parse_etcd_servers_overrides(text: str) -> tuple[EtcdServersOverride, ...]:
    """The entries of one ``--etcd-servers-overrides`` value, in order. Raises
    PlacementError naming the entry at fault."""
    try:
        entries = next(csv.reader([text], strict=True), []) if text else []
    except csv.Error as error:
        raise PlacementError(f"cannot split {text!r} at commas: {error}") from None
    return tuple(_parse_override(entry) for entry in entries)


def _parse_override(entry: str) -> EtcdServersOverride:
    # kube: Split(override, "#") must give exactly two tokens, and Split(tokens[0], "/")
    # exactly two: group (empty for the core group) and resource.
    tokens = entry.split("#")
    if len(tokens) != 2 or len(tokens[0].split("/")) != 2:
        raise PlacementError(f"invalid override {entry!r}: {OVERRIDE_FORMAT}")
    group, resource = tokens[0].split("/")
    if not resource:
        raise PlacementError(f"invalid override {entry!r}: the resource is empty")
    name = group_resource_name(group, resource)
    if not _GROUP_RESOURCE.fullmatch(name):
        raise PlacementError(
            f"invalid override {entry!r}: {tokens[0]!r} is not a group/resource "
            "(lowercase, as in coordination.k8s.io/leases)"
        )
    servers = tuple(_endpoint(entry, server) for server in tokens[1].split(";"))
    return EtcdServersOverride(name, tuple(dict.fromkeys(servers)))


def _endpoint(entry: str, server: str) -> str:
    if not server:
        raise PlacementError(f"invalid override {entry!r}: a server is empty")
    found = _SERVER.fullmatch(server)
    if found is None:
        raise PlacementError(
            f"invalid override {entry!r}: {server!r} is not an etcd URL "
            "(http://host:port or host:port)"
        )
    scheme = (found["scheme"] or "http").lower()
    if scheme != "http":
        raise PlacementError(
            f"invalid override {entry!r}: {server!r}: only http:// etcd URLs are supported (no TLS)"
        )
    if not 1 <= int(found["port"]) <= 65535:
        raise PlacementError(f"invalid override {entry!r}: {server!r}: the port is out of range")
    return f"{found['host']}:{found['port']}"


def merge_overrides(overrides: Iterable[EtcdServersOverride]) -> dict[str, tuple[str, ...]]:
    """group_resource → servers; a later entry for a resource replaces an earlier one, as
    kube's ``SetEtcdLocation`` does."""
    merged: dict[str, tuple[str, ...]] = {}
    for override in overrides:
        merged[override.group_resource] = override.servers
    return merged


def parse_resource_names(text: str) -> frozenset[str]:
    """Comma-separated ``group_resource`` names (``events,leases.coordination.k8s.io``);
    empty items are skipped. Raises PlacementError for a name that cannot be one, or for
    no name at all."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise PlacementError("no resource named")
    for name in names:
        if not _GROUP_RESOURCE.fullmatch(name):
            raise PlacementError(
                f"{name!r} is not a resource name: resource[.group], lowercase "
                "(events, leases.coordination.k8s.io)"
            )
    return frozenset(names)


def describe(overrides: Mapping[str, Sequence[str]]) -> list[str]:
    """One line per override, for the banner and the log."""
    return [f"{name} on {';'.join(servers)}" for name, servers in sorted(overrides.items())]
