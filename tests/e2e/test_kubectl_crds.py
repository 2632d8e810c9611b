"""kubectl 1.20 and 1.37 with a CustomResourceDefinition, as a user drives one: apply the
CRD, wait for it, then apply, get (printer columns, short name, field selector), explain,
describe, events, scale, watch and delete its objects, and delete the CRD."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable

import httpx
import pytest

Kubectl = Callable[..., Awaitable[subprocess.CompletedProcess[str]]]
Spawn = Callable[..., Awaitable[asyncio.subprocess.Process]]

pytestmark = pytest.mark.parametrize("kubectl_binary", ["1.20", "1.37"], indirect=True)

CRD_YAML = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A widget, for the e2e tests.
        properties:
          spec:
            type: object
            description: What the widget should be.
            required: [color]
            properties:
              color:
                type: string
                description: The widget's color.
                enum: [red, blue, green]
              replicas:
                type: integer
                default: 1
          status:
            type: object
            properties:
              replicas:
                type: integer
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    selectableFields:
    - jsonPath: .spec.color
"""

WIDGET_YAML = """\
apiVersion: example.com/v1
kind: Widget
metadata:
  name: {name}
  namespace: default
spec:
  color: {color}
"""


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args} failed:\n{result.stderr}"
    return result.stdout


async def install_crd(kubectl: Kubectl) -> None:
    out = ok(await kubectl("apply", "-f", "-", stdin=CRD_YAML))
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com" in out
    ok(
        await kubectl(
            "wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s"
        )
    )


async def test_a_crd_kind_through_kubectl(
    kubectl: Kubectl, kubectl_version: str, http: httpx.AsyncClient
) -> None:
    await install_crd(kubectl)
    assert "widgets.example.com" in ok(await kubectl("get", "crds"))
    for name, color in (("w1", "red"), ("w2", "blue")):
        out = ok(
            await kubectl("apply", "-f", "-", stdin=WIDGET_YAML.format(name=name, color=color))
        )
        assert f"widget.example.com/{name} created" in out
    # Re-applying the same file is a no-op patch.
    again = ok(await kubectl("apply", "-f", "-", stdin=WIDGET_YAML.format(name="w1", color="red")))
    assert "widget.example.com/w1 unchanged" in again
    table = ok(await kubectl("get", "widgets", "-n", "default"))
    header, *rows = table.splitlines()
    assert header.split() == ["NAME", "COLOR", "REPLICAS", "AGE"]
    assert [r.split()[:3] for r in rows] == [["w1", "red", "1"], ["w2", "blue", "1"]]
    short = ok(await kubectl("get", "wd", "-n", "default", "--field-selector", "spec.color=blue"))
    assert [r.split()[0] for r in short.splitlines()[1:]] == ["w2"]
    explained = ok(await kubectl("explain", "widgets.spec.color"))
    assert "The widget's color." in explained
    # Validation by the schema, worded as kube-apiserver words it.
    bad = await kubectl("apply", "-f", "-", stdin=WIDGET_YAML.format(name="w3", color="purple"))
    assert bad.returncode != 0
    assert 'Unsupported value: "purple"' in bad.stderr
    # An event about w1, then describe and events show it.
    uid = ok(
        await kubectl("get", "widget", "w1", "-n", "default", "-o", "jsonpath={.metadata.uid}")
    )
    event = {
        "metadata": {"name": f"w1.{uid}"},
        "involvedObject": {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "name": "w1",
            "namespace": "default",
            "uid": uid,
        },
        "reason": "Checked",
        "message": "the e2e test looked at it",
        "type": "Normal",
        "source": {"component": "e2e"},
        "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    posted = await http.post("/api/v1/namespaces/default/events", json=event)
    assert posted.status_code == 201, posted.text
    described = ok(await kubectl("describe", "widget", "w1", "-n", "default"))
    assert "Color:" in described and "red" in described
    assert "Checked" in described and "the e2e test looked at it" in described
    if kubectl_version != "1.20":  # kubectl events came in 1.26
        events = ok(await kubectl("events", "-n", "default", "--for", "widget/w1"))
        assert "Checked" in events and "Widget/w1" in events
    # The scale subresource.
    ok(await kubectl("scale", "widget", "w1", "-n", "default", "--replicas=3"))
    replicas = ok(
        await kubectl("get", "widget", "w1", "-n", "default", "-o", "jsonpath={.spec.replicas}")
    )
    assert replicas == "3"
    ok(await kubectl("delete", "widget", "w2", "-n", "default"))
    assert (await kubectl("get", "widget", "w2", "-n", "default")).returncode != 0
    ok(await kubectl("delete", "crd", "widgets.example.com", "--timeout=30s"))
    gone = await kubectl("get", "crd", "widgets.example.com")
    assert gone.returncode != 0 and "NotFound" in gone.stderr


async def test_kubectl_get_watch_sees_new_custom_objects(
    kubectl: Kubectl, kubectl_spawn: Spawn
) -> None:
    await install_crd(kubectl)
    ok(await kubectl("apply", "-f", "-", stdin=WIDGET_YAML.format(name="first", color="red")))
    watcher = await kubectl_spawn("get", "widgets", "-n", "default", "--watch")
    assert watcher.stdout is not None
    seen = ""

    async def read_until(name: str) -> None:
        nonlocal seen
        while name not in seen:
            line = await watcher.stdout.readline()  # type: ignore[union-attr]
            assert line, f"the watch ended before {name} was seen; output so far:\n{seen}"
            seen += line.decode()

    await asyncio.wait_for(read_until("first"), 20)
    ok(await kubectl("apply", "-f", "-", stdin=WIDGET_YAML.format(name="second", color="blue")))
    await asyncio.wait_for(read_until("second"), 20)
    assert "blue" in seen
    ok(await kubectl("delete", "crd", "widgets.example.com", "--timeout=30s"))
