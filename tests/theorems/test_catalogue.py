"""The whole catalogue on the quick profile, one pytest case per theorem or control (ids as names):
every theorem must PASS and every negative control must FAIL."""

import pytest

from checks.testing import assert_verdict_as_expected, parametrize_with_theorems


@parametrize_with_theorems(profile="quick")
def test_theorem_quick_profile(theorem_cls, profile):
    assert_verdict_as_expected(theorem_cls, profile=profile)


@pytest.mark.slow
@parametrize_with_theorems(profile="full")
def test_theorem_full_profile(theorem_cls, profile):
    """`tox -e slow`: the full profile (at least 50 confirmed instances per theorem), ~2 minutes."""
    assert_verdict_as_expected(theorem_cls, profile=profile)
