"""Plugin theorems for the pytest-plugin tests (checks/pytest_plugin.py): a true statement with two
predictions and a documented finding on one of them.

``finding-sum``: a uniform draw lies in [0, 1) (``check_range``, true), and ``check_marked`` fails on
instance ATTNSVM_TEST_FINDING_AT (default 2) alone, which ``finding_seen`` documents for (quick, seed 0):
its case is a strict xfail while that instance fails, and a failure once it does not (set the variable to
an instance the profile does not have). The control claims the draw lies below 0.5 (false)."""

import os

from checks import Profile, Theorem, decide, register

PROFILES = {"quick": Profile(instances=6, min_confirmed=4)}


def _finding_at() -> int:  # read when used: a test sets it for one run
    return int(os.environ.get("ATTNSVM_TEST_FINDING_AT", "2"))


@register
class FindingSum(Theorem):
    id = "finding-sum"
    title = "A uniform draw lies in [0, 1); one marked instance is a documented finding"
    reference = "test fixture"
    profiles = PROFILES
    finding = "test fixture: check_marked fails on the marked instance, documented as a finding"
    finding_seen = {("quick", 0): (2,)}

    def instance(self, rng, ctx):
        return float(rng.uniform())

    def check_range(self, x, state, ctx):
        return decide(0 <= x < 1, "out of range", x=x)

    def check_marked(self, x, state, ctx):
        return decide(ctx.instance != _finding_at(), "the marked instance", x=x)


@register
class FindingSumControl(FindingSum):
    id = "finding-sum-control"
    title = "Control: a uniform draw lies below 0.5"
    expected = "FAIL"
    control_of = "finding-sum"

    def check_range(self, x, state, ctx):
        return decide(x < 0.5, "a draw at or above 0.5", x=x)

    def check_marked(self, x, state, ctx):
        return decide(x >= 0, "a negative draw", x=x)
