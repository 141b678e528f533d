"""The error catalogue: one class per code, each error's text starting with its code, and the codes a
lifecycle macro fails with turned back into the same classes (errors.error_for), so a caller catches
the same exception whichever host ran the merge."""

from __future__ import annotations

import pytest

import merge_core.api.service_client  # noqa: F401  (its MergeError subclass, as in any process that imports it)
from merge_core.common import errors, macros

# the classes of the catalogue: errors.py's; another module's subclass (service_client's ServiceUnreachable)
# keeps the generic code, so a code still names one class of errors.py
CLASSES = [c for c in errors._all(errors.MergeError) if c.__module__ == errors.__name__]
DECLARED = macros.fill("codes")["error"]


def test_every_class_carries_a_declared_code_and_no_two_share_one():
    codes = [cls.code for cls in CLASSES]
    assert len(codes) == len(set(codes))
    assert {cls.code for cls in errors._all(errors.MergeError)} <= set(DECLARED.values())  # any module's


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_raised_error_starts_with_its_code_and_is_a_merge_error(cls):
    error = errors.error_for(cls.code, "what went wrong and the fix")
    assert type(error) is cls and isinstance(error, errors.MergeError)
    assert str(error) == f"{cls.code}: what went wrong and the fix"


def test_a_moved_version_is_retried_by_python_not_shown():
    error = errors.error_for(DECLARED["version_moved"], "another merge committed")
    assert isinstance(error, errors.RetryableConflict)


def test_an_undeclared_code_keeps_its_text_under_the_generic_class():
    error = errors.error_for("SOMETHING_NEW", "from a newer macro")
    assert type(error) is errors.MergeError and "SOMETHING_NEW: from a newer macro" in str(error)


def test_a_duplicate_match_carries_its_rule_and_examples():
    rows = [{"id": "1", "source_rows": 2}]
    error = errors.error_for(DECLARED["duplicate"], "two source rows", rows, {"rule": "trino"})
    assert isinstance(error, errors.DuplicateMatchError) and (error.rule, error.examples) == ("trino", rows)


def test_a_validation_error_lists_each_problem():
    error = errors.error_for(DECLARED["validation"], "2 problems", fields={"errors": ["a", "b"]})
    assert isinstance(error, errors.ValidationError) and error.errors == ["a", "b"]
    assert errors.error_for(DECLARED["validation"], "one").errors == ["one"]
