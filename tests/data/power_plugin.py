"""Plugin theorems for the power-analysis tests: one honest check of GD and one hollow one.

Both declare ``depends_on = ("gd",)``; ``attnsvm power`` must find that a no-op optimiser changes the
verdict of the first and leaves the second (whose check never looks at the optimiser's output) PASS.
"""

from checks import Profile, Theorem, decide, register
from numerics.data import random_unit_sphere
from numerics.gd import GDConfig, run_gd

PROFILES = {"quick": Profile(instances=3, min_confirmed=3)}


@register
class GDLowersLoss(Theorem):
    id = "power-gd-lowers-loss"
    depends_on = ("gd",)
    title = "Normalised GD lowers the attention loss (power-test fixture)"
    reference = "test fixture"
    profiles = PROFILES

    def instance(self, rng, ctx):
        return random_unit_sphere(3, 4, 5, rng=rng)

    def check_loss_drops(self, data, state, ctx):
        start = run_gd(data, GDConfig(steps=0, lr=0.1)).loss[0]
        end = run_gd(data, GDConfig(steps=40, lr=0.1)).loss[0]
        return decide(end < start - 1e-3, "GD did not lower the loss", start=float(start), end=float(end))


@register
class HollowGD(Theorem):
    id = "power-hollow-gd"
    depends_on = ("gd",)
    title = "A hollow check: claims to test GD, looks only at the data (power-test fixture)"
    reference = "test fixture"
    profiles = PROFILES

    def instance(self, rng, ctx):
        return random_unit_sphere(3, 4, 5, rng=rng)

    def check_shape(self, data, state, ctx):
        run_gd(data, GDConfig(steps=5, lr=0.1))  # runs the optimiser but ignores what it returns
        return decide(data.X.shape == (3, 4, 5), "wrong shape")
