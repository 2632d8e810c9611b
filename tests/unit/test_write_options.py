"""Write options (CreateOptions, UpdateOptions, PatchOptions, DeleteOptions) decode and
validate as apimachinery's ``Validate*Options`` do: 422 naming the options kind, or 400
for what does not decode."""

from __future__ import annotations

import json

import pytest

from watchcache.wire.errors import BadRequestError, InvalidError
from watchcache.wire.write_options import (
    CreateOptions,
    DeleteOptions,
    FieldValidation,
    PatchOptions,
    PropagationPolicy,
    UpdateOptions,
)


def test_dry_run_all_is_a_dry_run_and_absent_is_not() -> None:
    assert CreateOptions.from_query([("dryRun", "All")]).dry_run is True
    assert UpdateOptions.from_query([("dryRun", "All"), ("dryRun", "All")]).dry_run is True
    assert PatchOptions.from_query([("pretty", "true")]).dry_run is False
    assert DeleteOptions.decode([("dryRun", "All")]).dry_run is True


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ([("dryRun", "all")], '["all"]'),
        ([("dryRun", "")], '[""]'),
        ([("dryRun", "All"), ("dryRun", "true")], '["All","true"]'),
    ],
)
def test_any_other_dry_run_value_is_invalid_as_kubernetes_words_it(
    query: list[tuple[str, str]], shown: str
) -> None:
    with pytest.raises(InvalidError) as caught:
        CreateOptions.from_query(query)
    error = caught.value
    assert error.code == 422
    assert error.message == (
        f'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: {shown}: '
        'supported values: "All"'
    )
    status = json.loads(error.to_json())
    assert status["details"] == {
        "group": "meta.k8s.io",
        "kind": "CreateOptions",
        "causes": [
            {
                "reason": "FieldValueNotSupported",
                "message": f'Unsupported value: {shown}: supported values: "All"',
                "field": "dryRun",
            }
        ],
    }


def test_each_verb_names_its_own_options_kind() -> None:
    for options, kind in (
        (UpdateOptions, "UpdateOptions"),
        (PatchOptions, "PatchOptions"),
    ):
        with pytest.raises(InvalidError, match=rf'^{kind}\.meta\.k8s\.io "" is invalid'):
            options.from_query([("dryRun", "x")])
    with pytest.raises(InvalidError, match=r'^DeleteOptions\.meta\.k8s\.io "" is invalid'):
        DeleteOptions.decode([("dryRun", "x")])
    with pytest.raises(InvalidError, match=r'^DeleteOptions\.meta\.k8s\.io "" is invalid'):
        DeleteOptions.decode([], {"dryRun": ["Some"]})


def test_field_validation_defaults_to_warn_and_refuses_unknown_values() -> None:
    assert CreateOptions.from_query([]).field_validation is FieldValidation.WARN
    assert CreateOptions.from_query([("fieldValidation", "Strict")]).field_validation is (
        FieldValidation.STRICT
    )
    with pytest.raises(InvalidError) as caught:
        UpdateOptions.from_query([("fieldValidation", "strict")])
    assert caught.value.message == (
        'UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
        '"strict": supported values: "", "Ignore", "Strict", "Warn"'
    )


def test_field_manager_must_be_short_and_printable() -> None:
    assert CreateOptions.from_query([("fieldManager", "kubectl-create")]).field_manager == (
        "kubectl-create"
    )
    with pytest.raises(InvalidError) as caught:
        CreateOptions.from_query([("fieldManager", "x" * 129), ("dryRun", "no")])
    causes = caught.value.details.causes
    assert [c.field for c in causes] == ["fieldManager", "dryRun"]
    assert causes[0].message == "Too long: may not be more than 128 bytes"
    with pytest.raises(InvalidError, match=r"invalid character U\+0007 \(at position 1\)"):
        CreateOptions.from_query([("fieldManager", "a\x07")])


def test_force_belongs_to_apply_patches_only() -> None:
    with pytest.raises(InvalidError) as caught:
        PatchOptions.from_query([("force", "true"), ("dryRun", "x")])
    assert [c.field for c in caught.value.details.causes] == ["force", "dryRun"]


def test_delete_options_come_from_the_query_and_the_body_overrides_them() -> None:
    options = DeleteOptions.decode(
        [("gracePeriodSeconds", "30"), ("propagationPolicy", "Background")],
        {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": "u-1", "resourceVersion": "7"},
        },
    )
    assert options == DeleteOptions(
        grace_period_seconds=0,
        propagation_policy=PropagationPolicy.BACKGROUND,
        precondition_uid="u-1",
        precondition_resource_version="7",
    )
    # A dryRun in the query survives a body that does not mention it (Kubernetes would drop
    # the whole query once there is a body; the safe reading is kept deliberately).
    assert DeleteOptions.decode([("dryRun", "All")], {}).dry_run is True
    assert DeleteOptions.decode([("orphanDependents", "false")]).orphan_dependents is False


@pytest.mark.parametrize(
    "body",
    [
        {"dryRun": "All"},
        {"dryRun": [1]},
        {"gracePeriodSeconds": "5"},
        {"gracePeriodSeconds": 2**63},
        {"gracePeriodSeconds": True},
        {"propagationPolicy": 1},
        {"orphanDependents": "yes"},
        {"preconditions": []},
        {"preconditions": {"uid": 5}},
        {"kind": "Pod"},
    ],
)
def test_delete_option_members_of_the_wrong_type_are_bad_requests(body: dict[str, object]) -> None:
    with pytest.raises(BadRequestError):
        DeleteOptions.decode([], body)


def test_a_bad_grace_period_in_the_query_is_a_bad_request() -> None:
    with pytest.raises(BadRequestError, match=r'parsing "1\.5": invalid syntax'):
        DeleteOptions.decode([("gracePeriodSeconds", "1.5")])


def test_propagation_policy_is_checked_as_kubernetes_does() -> None:
    with pytest.raises(InvalidError) as caught:
        DeleteOptions.decode([("propagationPolicy", "Sideways")])
    assert caught.value.message == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"'
    )
    with pytest.raises(InvalidError, match="cannot be both set"):
        DeleteOptions.decode([], {"orphanDependents": True, "propagationPolicy": "Orphan"})
