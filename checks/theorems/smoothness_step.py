r"""smoothness-step — ∇L(W) is L_W-Lipschitz with the explicit bound L̄_W, and GD with η ≤ 1/L_W descends.

Statement (TLTO §3, the smoothness lemma behind the GD theorems: "L is L_W-smooth", with L_W bounded by the
data;
the explicit bound is *reconstructed* — derived in checks/theorems/_smoothness.py, one definition shared with
gd-global): for the logistic loss and a linear head v,

.. math:: \|\nabla L(W_1) - \nabla L(W_2)\|_F \le \bar L_W \|W_1 - W_2\|_F,\qquad
          \bar L_W = \tfrac1n \textstyle\sum_i \|X_i\|_2^2\|z_i\|^2(\Delta_i^2/16 + \Delta_i),

and plain GD W(k+1) = W(k) − η∇L(W(k)) with η ≤ 1/L_W satisfies the descent lemma
L(W(k+1)) ≤ L(W(k)) − (η/2)‖∇L(W(k))‖_F² (so the loss decreases monotonically, strictly while ∇L ≠ 0).

Hypotheses implemented: Assumption A for the logistic loss (sympy proof, checks.hypotheses); the step
η = 1/L̄_W exactly (the largest step the statement allows, with L̄_W ≥ L_W; ``assume_step`` re-checks η·L̄_W ≤
1).
Instance family, by instance index mod 3: generic unit-sphere data (n ∈ 2..4, T ∈ 2..5, d ∈ 2..6, W(0) ~ N(0,
0.5²)),
B.2 data (checks.strategies.b2_data, n=3, T=4, d=5), and "valley" data (checks.strategies.valley_data, d ∈
2..5:
two examples with the same tokens and opposite labels, a finite minimiser at δ* where the curvature along
F = (x_1 − x_2)z^T is λ* = ℓ''(0)·u'(δ*)²·‖F‖², the instance where the bound is closest to tight), started
one logit from the valley floor.

Predictions.

* ``lipschitz``: the ratio ‖∇L(W_1) − ∇L(W_2)‖/‖W_1 − W_2‖, with the production closed form
  (numerics.attention.grad_W), never exceeds L̄_W (relative slack LIP_RTOL) over random pairs at scales 0.1,
  1, 10,
  near pairs (W_2 = W_1 + 1e-3·E, the Hessian's action) and ADVERSARIAL pairs: Adam ascent of the ratio (torch
  autograd through an independent closed form of ∇L) from the best random pairs. The production gradient must
  also agree with the independent numpy gradient (checks.theorems._gd.independent_grad_W) at every evaluated W
  to
  GRAD_RTOL: a ratio judged on a wrong gradient (a transposed one has the same Lipschitz constant) says
  nothing.
* ``is_gradient_descent``: one step of numerics.gd.run_gd (plain, normalized=False) from W(0) and from
W(STEPS/2) is
  the step along the independent gradient (corr > 1 − FIDELITY_TOL).
* ``descent_lemma``: over STEPS plain GD steps with η = 1/L̄_W, every step satisfies
  L(W(k+1)) ≤ L(W(k)) − (η/2)‖∇L(W(k))‖² + LOSS_ATOL (‖∇L‖ from the independent gradient), and the total
  decrease is positive. A no-op, ascending or random optimiser breaks the lemma on the first steps.

Negative control (``smoothness-step-control``), at the boundary of the step condition: the same plain GD and
the
claim "the loss decreases monotonically" with a step η = 4/λ* on valley data, started 0.1 logit from the
floor.
Since λ* ≤ L_W (λ* is the exact curvature of L at its minimiser along F, in closed form), η ≥ 4/L_W =
2·(2/L_W):
well above the classical 2/L_W. Why the loss then increases (how the instance is chosen): on valley data L is
a
function of the scalar δ = ⟨F, W⟩ only, GD is one-dimensional in δ, and near δ* it multiplies δ − δ* by
1 − ηλ* = −3 per step, so L − L* grows ≈ 9× at the first step (the cubic remainder is O(0.1³)). Refuted at the
first step on every instance.

Numerics: numerics.gd.run_gd (torch path, plain GD, record every step), numerics.attention.grad_W.
"""

from __future__ import annotations

import numpy as np
import torch

from checks import Criterion, Profile, Theorem, decide, register
from checks import hypotheses as hyp
from checks.strategies import b2_data, valley_data
from numerics import attention as att
from numerics import tolerances as tol
from numerics.data import random_unit_sphere
from numerics.gd import run_gd
from numerics.tokens import scores

from ._gd import FIDELITY_TOL, independent_grad_W, judge_fidelity, step_fidelity
from ._smoothness import smoothness_bound

#: The bound is an inequality between float64 quantities: the ratio is computed from gradient differences of
#: pairs at distance ≥ 1e-3 with gradients accurate to ~1e-15 relative, so its rounding is ≤ 1e-11 relative;
#: 1e-9 is two orders above that and far below the ≥ 1.5× an ignored factor would show.
LIP_RTOL = 1e-9
#: Production vs independent closed-form gradient: both float64 with O(nTd) roundings; tol.GRAD_RTOL (1e-6) as
#: in gradient-closed-form, relative to max(‖∇L‖, GRAD_FLOOR) (GRAD_FLOOR: an O(1)-data gradient far below it
#: is 0).
GRAD_RTOL = tol.GRAD_RTOL
GRAD_FLOOR = 1e-12
#: Descent lemma slack: L is a mean of n softplus values O(1), each exact to a few ulps (~1e-16); the
#: difference of two losses and (η/2)‖∇L‖² carry ~1e-15 absolute error. 1e-12 leaves three orders for any BLAS
#: order, while the lemma's guaranteed decrease on the first steps is ≥ 1e-5 (measured), so a no-op step fails
#: it.
LOSS_ATOL = 1e-12
#: Plain GD budget: enough steps for the loss to fall measurably; record every step (the lemma is per step).
STEPS = 150
#: Scales of random pairs and the near-pair offset (the Hessian's action, E of unit norm).
PAIR_SCALES = (0.1, 1.0, 10.0)
NEAR_EPS = 1e-3
#: Adversarial ascent of the ratio: Adam step and the number of starts (best random pairs).
ASCENT_LR, ASCENT_STARTS = 0.05, 4
#: The control's step, in units of 1/λ*: 4/λ* ≥ 4/L_W = 2·(2/L_W); the control's start, in logits from δ*.
CONTROL_FACTOR, CONTROL_OFFSET = 4.0, 0.1
#: Valley start of the theorem: one logit from the floor.
VALLEY_OFFSET = 1.0

PROFILES = {
    "quick": Profile(instances=6, min_confirmed=6, params={"per_scale": 4, "ascent_steps": 25}),
    "full": Profile(instances=60, min_confirmed=55, params={"per_scale": 12, "ascent_steps": 80}),
    "paper": Profile(instances=200, min_confirmed=190, params={"per_scale": 20, "ascent_steps": 150}),
}


def valley_geometry(data):
    """(F, δ*, λ*) of valley data: F = (x_1 − x_2) z^T, the floor δ* = log(−γ_2/γ_1) (u = 0) and the exact
    curvature λ* = ℓ''(0) u'(δ*)² ‖F‖² of L along F there (ℓ''(0) = 1/4 for the logistic loss; L = ½[ℓ(u) +
    ℓ(−u)]
    has f'' = ℓ''(0)u'² at u = 0, u' = (γ_1 − γ_2)σ(1 − σ))."""
    x1, x2, z = data.X[0, 0], data.X[0, 1], data.Z[0]
    F = np.outer(x1 - x2, z)
    g1, g2 = scores(data)[0]
    sig = -g2 / (g1 - g2)
    delta = float(np.log(sig / (1 - sig)))
    lam = 0.25 * ((g1 - g2) * sig * (1 - sig)) ** 2 * float(np.sum(F * F))
    return F, delta, lam


def valley_point(data, offset: float, rng) -> np.ndarray:
    """A W with δ = ⟨F, W⟩ = δ* + offset and a random component orthogonal to F (which L ignores)."""
    F, delta, _ = valley_geometry(data)
    P = rng.standard_normal(F.shape)
    P -= np.sum(P * F) / np.sum(F * F) * F
    return P + (delta + offset) * F / np.sum(F * F)


def _torch_grad(X, Z, gamma, W):
    """Independent differentiable closed form of ∇L(W) (logistic, linear head), batched W (R, d, d)."""
    lg = torch.einsum("ntd,rde,ne->rnt", X, W, Z)
    s = torch.softmax(lg, dim=2)
    u = (s * gamma).sum(2)
    c = s * (gamma - u[..., None]) * (torch.sigmoid(u) - 1.0)[..., None]
    return torch.einsum("rnt,ntd,ne->rde", c, X, Z) / X.shape[0]


def adversarial_pairs(data, W1, W2, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Adam ascent of log(‖∇L(W_1) − ∇L(W_2)‖² / ‖W_1 − W_2‖²) from the given pairs (R, d, d) each."""
    X, Z = torch.tensor(data.X), torch.tensor(data.Z)
    gamma = torch.as_tensor(scores(data))
    A = torch.tensor(W1, requires_grad=True)
    B = torch.tensor(W2, requires_grad=True)
    opt = torch.optim.Adam([A, B], lr=ASCENT_LR)
    for _ in range(steps):
        num = (_torch_grad(X, Z, gamma, A) - _torch_grad(X, Z, gamma, B)).pow(2).sum((1, 2))
        den = (A - B).pow(2).sum((1, 2)).clamp_min(1e-12)
        f = torch.log(num + 1e-300) - torch.log(den)
        opt.zero_grad()
        (-f.sum()).backward()
        opt.step()
    return A.detach().numpy(), B.detach().numpy()


def _prod_grads(data, Ws: np.ndarray) -> np.ndarray:
    b = att.batch_from_data([data] * len(Ws))
    return att.grad_W(b.X, b.Y, b.Z, torch.as_tensor(np.ascontiguousarray(Ws)), b.linear_head()).numpy()


@register
class SmoothnessStep(Theorem):
    id = "smoothness-step"
    depends_on = ("gd", "gradient")
    title = ("∇L(W) is L_W-Lipschitz with the explicit bound L̄_W, and plain GD with η ≤ 1/L_W satisfies the "
             "descent lemma")
    reference = "TLTO §3 (smoothness of L and the step condition of the GD theorems; bound reconstructed)"
    statement = (r"\|\nabla L(W_1)-\nabla L(W_2)\|_F\le \bar L_W\|W_1-W_2\|_F,\quad \eta\le 1/L_W\Rightarrow "
                 r"L(W(k+1))\le L(W(k))-\tfrac{\eta}{2}\|\nabla L(W(k))\|_F^2")
    hypotheses_text = (
        "logistic loss (Assumption A, sympy proof); linear head; step η = 1/L̄_W (the largest the claim "
        "allows); generic unit-sphere, B.2 and valley data (finite minimiser) alternating"
    )
    profiles = PROFILES
    plot_metric = "lip_tightness"
    criteria = (
        Criterion("max over random, near and adversarial pairs of ratio / L̄_W", "<=", f"1 + {LIP_RTOL:g}",
                  plot_metric="lip_tightness"),
        Criterion("production vs independent gradient, relative", "<=", GRAD_RTOL),
        Criterion("per step L(k+1) − L(k) + (η/2)‖∇L(W(k))‖²", "<=", LOSS_ATOL),
        Criterion("corr(run_gd step, −∇L)", ">", f"1 - {FIDELITY_TOL:g}"),
    )
    theorem_number = None

    def not_applicable(self, data):
        return (
            "the check draws its own instances: random data for the L̄_W bound and the descent lemma, "
            "and valley data (a finite minimiser with exact curvature λ*) for its step-size control; "
            "running it on given data is not implemented"
        )

    def instance(self, rng, ctx):
        kind = ("generic", "B2", "valley")[ctx.instance % 3]
        if kind == "generic":
            data = random_unit_sphere(
                int(rng.integers(2, 5)), int(rng.integers(2, 6)), int(rng.integers(2, 7)), rng=rng
            )
            W0 = 0.5 * rng.standard_normal((data.d, data.d))
        elif kind == "B2":
            data = b2_data(3, 4, 5, rng=rng)
            W0 = 0.5 * rng.standard_normal((5, 5))
        else:
            data = valley_data(int(rng.integers(2, 6)), rng=rng)
            W0 = valley_point(data, VALLEY_OFFSET, rng)
        return {"data": data, "kind": kind, "W0": W0, "seed": int(rng.integers(2**31))}

    def step(self, inst) -> float:
        return 1.0 / smoothness_bound(inst["data"])

    def prepare(self, instances, ctxs):
        out = []
        for inst, ctx in zip(instances, ctxs, strict=True):
            data, eta = inst["data"], self.step(inst)
            res = run_gd([data], steps=STEPS, lr=eta, normalized=False, init=inst["W0"][None], record_every=1,
                         device=ctx.device)
            traj = np.asarray(res.W_traj)[:, 0]
            fid = min(step_fidelity(data, W, eta, normalized=False, device=ctx.device)
                      for W in (inst["W0"], traj[len(traj) // 2]))
            out.append({"eta": eta, "traj": traj, "losses": np.asarray(res.loss_traj)[:, 0], "fidelity": fid})
        return out

    def assume_loss_A(self, inst, st, ctx):
        return hyp.loss_satisfies_assumption_a("logistic")

    def assume_step(self, inst, st, ctx):
        L = smoothness_bound(inst["data"])
        return decide(
            st["eta"] * L <= 1.0 + 1e-12, f"η·L̄_W = {st['eta'] * L:.3g} > 1", L_bound=L, eta_L=st["eta"] * L
        )

    def check_lipschitz(self, inst, st, ctx):
        data, rng = inst["data"], ctx.rng
        d, k = data.d, int(ctx.params.get("per_scale", 4))
        W1, W2 = [], []
        for r in PAIR_SCALES:
            W1.append(r * rng.standard_normal((k, d, d)))
            W2.append(r * rng.standard_normal((k, d, d)))
            A = r * rng.standard_normal((k, d, d))
            E = rng.standard_normal((k, d, d))
            W1.append(A)
            W2.append(A + NEAR_EPS * E / np.linalg.norm(E, axis=(1, 2), keepdims=True))
        W1, W2 = np.concatenate(W1), np.concatenate(W2)
        ratio = self._ratios(data, W1, W2)
        best = np.argsort(-ratio)[:ASCENT_STARTS]
        A1, A2 = adversarial_pairs(data, W1[best], W2[best], int(ctx.params.get("ascent_steps", 25)))
        ok = np.linalg.norm(A1 - A2, axis=(1, 2)) >= NEAR_EPS  # keep the ratio's rounding ≤ 1e-11
        W1, W2 = np.concatenate([W1, A1[ok]]), np.concatenate([W2, A2[ok]])
        ratio = self._ratios(data, W1, W2)
        L = smoothness_bound(data)
        gerr = self._grad_disagreement(data, np.concatenate([W1, W2]))
        m = {
            "lip_tightness": float(ratio.max() / L),
            "lip_adv_gain": float(ratio[-int(ok.sum()) :].max() / ratio[: -int(ok.sum())].max())
            if ok.any()
            else 1.0,
            "L_bound": L,
            "pairs": int(len(ratio)),
            "grad_rel_err": gerr,
        }
        if inst["kind"] == "valley":
            m["valley_curvature_over_bound"] = valley_geometry(data)[2] / L
        if gerr > GRAD_RTOL:
            return decide(
                False,
                f"the production gradient disagrees with the independent closed form ({gerr:.3g} "
                f"relative): the ratio would be judged on a wrong gradient",
                **m,
            )
        return decide(ratio.max() <= L * (1 + LIP_RTOL),
                      f"‖∇L(W1) − ∇L(W2)‖/‖W1 − W2‖ = {ratio.max():.6g} exceeds L̄_W = {L:.6g}", **m)

    @staticmethod
    def _ratios(data, W1, W2):
        G1, G2 = _prod_grads(data, W1), _prod_grads(data, W2)
        return np.linalg.norm(G1 - G2, axis=(1, 2)) / np.linalg.norm(W1 - W2, axis=(1, 2))

    @staticmethod
    def _grad_disagreement(data, Ws):
        G = _prod_grads(data, Ws)
        err = 0.0
        for W, g in zip(Ws, G, strict=True):
            ref = independent_grad_W(data, W)
            err = max(err, float(np.linalg.norm(g - ref) / max(np.linalg.norm(ref), GRAD_FLOOR)))
        return err

    def check_is_gradient_descent(self, inst, st, ctx):
        return judge_fidelity(st["fidelity"])

    def _gnorm2(self, inst, st):
        return np.array([float(np.sum(independent_grad_W(inst["data"], W) ** 2)) for W in st["traj"][:-1]])

    def check_descent_lemma(self, inst, st, ctx):
        Ls, eta = st["losses"], st["eta"]
        g2 = self._gnorm2(inst, st)
        slack = (Ls[1:] - Ls[:-1]) + 0.5 * eta * g2  # ≤ 0 by the descent lemma
        k = int(np.argmax(slack))
        m = {"lemma_worst_slack": float(slack.max()), "loss_drop": float(Ls[0] - Ls[-1]),
             "first_guaranteed_drop": float(0.5 * eta * g2[0]), "loss_curve": Ls[::10].tolist(),
             "loss_iterations": list(range(0, len(Ls), 10))}  # the figure's x-axis: the GD step k
        if slack.max() > LOSS_ATOL:
            return decide(
                False,
                f"step {k}: L rose to {Ls[k + 1]:.12g} from {Ls[k]:.12g}, above the guaranteed "
                f"L(k) − (η/2)‖∇L‖² = {Ls[k] - 0.5 * eta * g2[k]:.12g}",
                **m,
            )
        return decide(Ls[-1] < Ls[0], "the loss did not decrease over the run", **m)


@register
class SmoothnessStepControl(SmoothnessStep):
    id = "smoothness-step-control"
    depends_on = ("gd", "gradient")
    title = "Control: plain GD with a step η = 4/λ* ≥ 2·(2/L_W) decreases the loss monotonically (false)"
    statement = r"\eta\ge 4/L_W\ (\text{valley data, }\eta=4/\lambda^\star)\Rightarrow L(W(k+1))\le L(W(k))"
    hypotheses_text = (
        "logistic loss; valley data (finite minimiser, exact curvature λ* ≤ L_W there); plain GD with "
        f"η = {CONTROL_FACTOR:g}/λ* ≥ {CONTROL_FACTOR:g}/L_W; start {CONTROL_OFFSET} logit from the floor"
    )
    expected = "FAIL"
    control_of = "smoothness-step"
    plot_metric = "first_step_rise"
    criteria = (Criterion("per step L(k+1) − L(k)", "<=", LOSS_ATOL),)

    def instance(self, rng, ctx):
        data = valley_data(int(rng.integers(2, 6)), rng=rng)
        return {"data": data, "kind": "valley", "W0": valley_point(data, CONTROL_OFFSET, rng),
                "seed": int(rng.integers(2**31))}

    def step(self, inst) -> float:
        return CONTROL_FACTOR / valley_geometry(inst["data"])[2]

    #: the control replaces the step hypothesis by its negation (None removes the inherited one)
    assume_step = None
    check_lipschitz = None
    check_descent_lemma = None

    def assume_step_well_above_2_over_L(self, inst, st, ctx):
        lam = valley_geometry(inst["data"])[2]
        return decide(
            st["eta"] * lam >= CONTROL_FACTOR * (1 - 1e-12),
            f"η·λ* = {st['eta'] * lam:.3g} < {CONTROL_FACTOR}",
            eta_lambda_star=st["eta"] * lam,
            eta_L_bound=st["eta"] * smoothness_bound(inst["data"]),
        )

    def check_monotone_decrease(self, inst, st, ctx):
        Ls = st["losses"]
        rise = np.diff(Ls)
        k = int(np.argmax(rise > LOSS_ATOL)) if (rise > LOSS_ATOL).any() else 0  # the first step that rose
        return decide(rise.max() <= LOSS_ATOL, f"step {k}: the loss rose from {Ls[k]:.6g} to {Ls[k + 1]:.6g}",
                      first_step_rise=float(rise[0]), max_rise=float(rise.max()))



