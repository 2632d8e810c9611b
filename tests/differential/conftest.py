"""Fixtures of the differential tests (tests/differential/README.md):

* ``smd_reference``: one ``smd-reference`` process for the whole session, stopped by PID at
  its end whatever the tests did. A binary that is not built fails the tests (with a message
  naming ``make smd-reference``) rather than skipping them: ``make test`` builds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from smd_reference import SmdReference, SmdReferenceMissing


@pytest.fixture(scope="session")
def smd_reference() -> Iterator[SmdReference]:
    reference = SmdReference()
    try:
        reference.start()
    except SmdReferenceMissing as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield reference
    finally:
        reference.close()
