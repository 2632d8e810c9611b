"""SpecMemo: derived once per spec object, bounded, failures not remembered; and the
compiled schema shared by the CRD controller's check, the strategy and apply's type."""

from __future__ import annotations

from typing import Any

import pytest

from watchcache.registry import apply_types
from watchcache.registry.custom_resource import (
    CustomResourceStrategy,
    InvalidSchemaError,
    compile_schema,
)
from watchcache.registry.resources import ResourceSpec
from watchcache.registry.spec_memo import SpecMemo
from watchcache.registry.structural import StructuralSchema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
}


def widget(schema: dict[str, Any] | None = SCHEMA) -> ResourceSpec:
    return ResourceSpec("widgets", "widget", "Widget", group="example.com", openapi_schema=schema)


def test_a_spec_is_derived_once_and_an_equal_spec_object_anew() -> None:
    asked: list[ResourceSpec] = []

    def derive(spec: ResourceSpec) -> object:
        asked.append(spec)
        return object()

    memo = SpecMemo(derive, size=4)
    spec = widget()
    assert memo(spec) is memo(spec)
    other = widget()
    assert other == spec and memo(other) is not memo(spec)
    assert asked == [spec, other]


def test_the_memo_keeps_the_specs_asked_for_last() -> None:
    memo = SpecMemo(lambda spec: object(), size=2)
    first, second, third = widget(), widget(), widget()
    kept = memo(first)
    memo(second)
    assert memo(first) is kept  # asked again: now the newest
    memo(third)  # pushes out second, the oldest
    assert len(memo) == 2 and memo(first) is kept


def test_a_derivation_that_raises_is_not_remembered() -> None:
    calls = 0

    def derive(spec: ResourceSpec) -> object:
        nonlocal calls
        calls += 1
        raise InvalidSchemaError("no")

    memo: SpecMemo[object] = SpecMemo(derive, size=2)
    spec = widget()
    for _ in range(2):
        with pytest.raises(InvalidSchemaError):
            memo(spec)
    assert calls == 2
    with pytest.raises(ValueError, match="at least one"):
        SpecMemo(derive, size=0)


def test_the_check_the_strategy_and_apply_share_one_compiled_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled = 0
    real = StructuralSchema.from_openapi

    def counting(*args: Any, **kwargs: Any) -> StructuralSchema:
        nonlocal compiled
        compiled += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(StructuralSchema, "from_openapi", counting)
    spec = widget()
    schema = compile_schema(spec)  # the CRD controller's check before it serves the version
    assert CustomResourceStrategy(spec).schema is schema
    assert apply_types.atom_for(spec).name == "com.example.v1.Widget"
    assert compiled == 1
