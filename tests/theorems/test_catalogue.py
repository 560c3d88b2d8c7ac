"""The whole catalogue on the quick profile, one pytest case per theorem or control (ids as names):
every theorem must PASS and every negative control must FAIL.

The default run (`tox -e py`, ~10 min on 2 cores) leaves out, as `slow`, the quick cases of the variants that
share their base check's code and differ by one flag (the self-attention variants: their family is drawn with
Z = None; their own unit tests and `tox -e checks` run them) and of the two plain-GD checks documented
UNDECIDABLE (p-svm-gd and its control spend ~20 s proving that plain GD cannot reach CORR_TOL; gd-local's
plain behaviour is tested in test_gd_checks). `tox -e slow` and `tox -e checks` run every entry."""

import pytest

from checks.testing import assert_verdict_as_expected, parametrize_with_theorems

#: quick cases left to `tox -e slow` (module docstring)
SLOW_QUICK = (
    "gd-global-self-attention", "gd-global-self-attention-control",
    "rp-w-frobenius-self", "rp-w-frobenius-self-control", "rp-kq-nuclear-self", "rp-kq-nuclear-self-control",
    "gd-local-normalized-self-attention", "gd-local-normalized-self-attention-control",
    "p-svm-gd", "p-svm-gd-control",
)


@parametrize_with_theorems(profile="quick", slow_ids=SLOW_QUICK)
def test_theorem_quick_profile(theorem_cls, profile):
    assert_verdict_as_expected(theorem_cls, profile=profile)


@pytest.mark.slow
@parametrize_with_theorems(profile="full")
def test_theorem_full_profile(theorem_cls, profile):
    """`tox -e slow`: the full profile (at least 50 confirmed instances per theorem), ~2 minutes."""
    assert_verdict_as_expected(theorem_cls, profile=profile)
