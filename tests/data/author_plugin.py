"""A plugin theorem and a control whose only refutations come from a broken integrity prediction (fixture of
tests/harness/test_plugin_authoring.py).

``author-loose-bound`` claims ||grad L(W)||_F <= 1 on unit data (true: |l'| <= 1, the token weights of one
example sum in absolute value to at most half the range of gamma, <= 1, and ||x|| ||z|| <= 1). Its integrity
prediction compares grad_W with a float32 evaluation of the same formula at a relative 1e-12, which no float32
reference meets: the integrity check itself is broken, as the issue's autograd reference was on a saturated
instance. ``author-integrity-only-control`` restates the true claim as a "control": it FAILs, but only through
that integrity prediction, so it has no power and must fail the run (CONTROL LOST POWER).
"""

import numpy as np
import torch

from checks import Profile, Theorem, decide, register
from numerics import attention as att
from numerics.data import random_unit_sphere
from numerics.objective import grad_W


@register
class LooseBound(Theorem):
    id = "author-loose-bound"
    title = "The attention gradient's norm is at most 1 on unit data (fixture)"
    reference = "test fixture"
    depends_on = ("gradient",)
    profiles = {"quick": Profile(instances=3, min_confirmed=3)}

    def instance(self, rng, ctx):
        return random_unit_sphere(2, 3, 3, rng=rng), rng.standard_normal((3, 3))

    def check_bound(self, inst, state, ctx):
        data, W = inst
        g = float(np.linalg.norm(grad_W(data, W)))
        return decide(g <= 1.0, "the gradient norm exceeds 1", grad_norm=g)


@register
class IntegrityOnlyControl(LooseBound):
    id = "author-integrity-only-control"
    title = "A control refuted only by a broken integrity prediction (fixture)"
    expected = "FAIL"
    control_of = "author-loose-bound"
    integrity = ("float32_reference_agrees",)

    def check_float32_reference_agrees(self, inst, state, ctx):
        data, W = inst
        b = att.batch_from_data(data, dtype=torch.float32)
        ref = att.grad_W(b.X, b.Y, b.Z, torch.as_tensor(W, dtype=torch.float32)[None], b.linear_head())[0]
        G = grad_W(data, W)
        err = float(np.abs(G - ref.double().numpy()).max() / np.abs(G).max())
        return decide(err <= 1e-12, "grad_W disagrees with the float32 reference", ref_err=err)
