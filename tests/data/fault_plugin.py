"""Plugin theorems whose instances fault the process that runs them, for the worker-fault tests (issue 27).

``crash-sum``: instance ATTNSVM_TEST_CRASH_AT (default 4) kills its own process with SIGKILL in its
prediction, every time it runs, as a segfaulting solver or the OOM killer would. ``hang-sum``: instance
ATTNSVM_TEST_HANG_AT (default 1) sleeps ATTNSVM_TEST_HANG_S seconds (default 60) in its prediction, as a
stalled solver would. ``crash-prepare``: the batch holding instance ATTNSVM_TEST_CRASH_AT kills its
process in ``prepare`` when that instance is in the batch. Every other instance is an ordinary true
statement (a uniform draw lies in [0, 1)); each theorem has its control (the same draw below 0.5)."""

import os
import signal
import time

from checks import Profile, Theorem, decide, register


def _crash_at() -> int:  # read when used, not at import: a test sets it after the plugin was loaded
    return int(os.environ.get("ATTNSVM_TEST_CRASH_AT", "4"))


PROFILES = {"quick": Profile(instances=6, min_confirmed=4, batch=3)}


class _Draw(Theorem):
    reference = "test fixture"
    profiles = PROFILES

    def instance(self, rng, ctx):
        return float(rng.uniform())


@register
class CrashSum(_Draw):
    id = "crash-sum"
    title = "A uniform draw lies in [0, 1); one instance kills its worker"

    def check_range(self, x, state, ctx):
        if ctx.instance == _crash_at():
            os.kill(os.getpid(), signal.SIGKILL)
        return decide(0 <= x < 1, "out of range", x=x)


@register
class CrashSumControl(_Draw):
    id = "crash-sum-control"
    title = "Control: a uniform draw lies below 0.5"
    expected = "FAIL"
    control_of = "crash-sum"

    def check_half(self, x, state, ctx):
        return decide(x < 0.5, "a draw is above 0.5", x=x)


@register
class HangSum(_Draw):
    id = "hang-sum"
    title = "A uniform draw lies in [0, 1); one instance never returns"

    def check_range(self, x, state, ctx):
        if ctx.instance == int(os.environ.get("ATTNSVM_TEST_HANG_AT", "1")):
            time.sleep(float(os.environ.get("ATTNSVM_TEST_HANG_S", "60")))
        return decide(0 <= x < 1, "out of range", x=x)


@register
class HangSumControl(CrashSumControl):
    id = "hang-sum-control"
    control_of = "hang-sum"


@register
class CrashPrepare(_Draw):
    id = "crash-prepare"
    title = "A uniform draw lies in [0, 1); preparing one instance kills its worker"

    def prepare(self, instances, ctxs):
        if any(c.instance == _crash_at() for c in ctxs):
            os.kill(os.getpid(), signal.SIGKILL)
        return [None] * len(instances)

    def check_range(self, x, state, ctx):
        return decide(0 <= x < 1, "out of range", x=x)


@register
class CrashPrepareControl(CrashSumControl):
    id = "crash-prepare-control"
    control_of = "crash-prepare"
