"""A deliberately slow plugin theorem for the interrupt/resume tests (0.06 s per instance, or
ATTNSVM_TEST_SLEEP seconds: the interrupted run goes slower, so that on a loaded machine it cannot finish
before the test's signal arrives)."""

import os
import time

from checks import Profile, Theorem, decide, register

SLEEP = float(os.environ.get("ATTNSVM_TEST_SLEEP", "0.06"))
PROFILES = {"quick": Profile(instances=16, min_confirmed=10, batch=2)}


@register
class SlowTheorem(Theorem):
    id = "slow-sum"
    title = "A slow true statement: uniform draws lie in [0, 1)"
    reference = "test fixture"
    profiles = PROFILES

    def instance(self, rng, ctx):
        return rng.uniform(size=3)

    def assume_nonempty(self, x, state, ctx):
        return x.size > 0

    def check_range(self, x, state, ctx):
        time.sleep(SLEEP)
        return decide(bool(((x >= 0) & (x < 1)).all()), "out of range", xmax=float(x.max()))


@register
class SlowControl(SlowTheorem):
    id = "slow-sum-control"
    title = "Control: uniform draws lie in [0, 0.5)"
    expected = "FAIL"
    control_of = "slow-sum"

    def check_range(self, x, state, ctx):
        time.sleep(SLEEP)
        return decide(bool((x < 0.5).all()), "a draw is above 0.5", xmax=float(x.max()))
