"""The rebuilt landscape checks (issue 14 items 2-3): no-stationary-points, overparam-landscape, gen-svm.

For each: the theorem PASSes on quick/seed 0, its boundary control FAILs, and a relevant sabotage of the
numerics it depends on (GD that does not move, GD that ascends, ...) makes the theorem FAIL.
"""

from __future__ import annotations

import copy
import types

import numpy as np
import pytest
import torch

from checks import catalogue
from checks.harness import run_theorem
from checks.theorem import REGISTRY
from numerics import attention as att
from numerics.gd import RandomInit

catalogue.load_builtin()


def _fake_gd(mode: str):
    """A stand-in for numerics.gd.run_gd: 'noop' returns W(0) at every recorded step; 'ascent' runs
    normalised gradient ASCENT of the same loss (linear head) with the same step."""

    def run(data, cfg, *, init=None, record_every=None, device="cpu", head=None):
        steps, lr, loss, seed = cfg.steps, cfg.lr, cfg.loss, 0
        if isinstance(init, RandomInit):
            seed, init = init.seed, None
        datas = [data] if not isinstance(data, (list, tuple)) else list(data)
        b = att.batch_from_data(datas)
        R, d = len(datas), datas[0].d
        g = torch.Generator().manual_seed(int(np.atleast_1d(seed)[0]))
        W = (torch.as_tensor(np.asarray(init)) if init is not None
             else 0.01 * torch.randn((R, d, d), generator=g, dtype=torch.float64)).clone()
        hd = head if head is not None else att.LinearHead(b.v)
        every = record_every or steps
        traj, losses = [], []
        for k in range(steps + 1):
            L, G = att.loss_and_grad_W(b.X, b.Y, b.Z, W, hd, loss)
            if k % every == 0 or k == steps:
                traj.append(W.clone().numpy())
                losses.append(L.numpy())
            if mode == "ascent" and k < steps:
                W = W + lr * G / G.flatten(1).norm(dim=1)[:, None, None]
        return types.SimpleNamespace(W=traj[-1], W_traj=np.stack(traj), loss_traj=np.stack(losses),
                                     norms=np.linalg.norm(traj[-1], axis=(1, 2)), loss=losses[-1])

    return run


# -- no-stationary-points ------------------------------------------------------------------------------
def test_no_stationary_points_pass_and_certified_by_construction():
    r = run_theorem(REGISTRY["no-stationary-points"], profile="quick", seed=0)
    assert r.verdict == "PASS", r.reasons
    assert r.metrics["sign_fixed_by_construction"]["min"] == 1.0  # B.1/B.2: the sign is structural
    assert r.metrics["norm_growth_share"]["min"] > 0.9


def test_no_stationary_points_control_fails_for_the_sign():
    r = run_theorem(REGISTRY["no-stationary-points-control"], profile="quick", seed=0)
    assert r.verdict == "FAIL"
    assert r.counts["refuted"] >= 6
    assert all("descent_everywhere" in k for k in r.reasons)
    assert r.metrics["sign_fixed_by_construction"]["max"] == 0.0


@pytest.mark.parametrize("mode", ["noop", "ascent"])
def test_no_stationary_points_refutes_a_broken_optimiser(monkeypatch, mode):
    from checks.theorems import no_stationary_points as mod

    monkeypatch.setattr(mod, "run_gd", _fake_gd(mode))
    r = run_theorem(REGISTRY["no-stationary-points"], profile="quick", seed=0)
    assert r.verdict == "FAIL"
    assert r.counts["refuted"] == r.counts["instances"] - r.counts["vacuous"]
    assert all("norm_diverges" in k for k in r.reasons if k.startswith("refuted"))


def test_sign_certificate_is_exact():
    from checks.theorems._landscape import sign_fixed

    g = np.array([[1.0, 0.0, 0.0]])
    assert sign_fixed(g, np.array([[2.0, 1.0, 1.0]]))[0]  # B.1 margins: structural
    assert not sign_fixed(g + [[0, 0.1, 0]], np.array([[2.0, 1.0, 1.5]]))[0]  # a negative non-optimal pair
    assert not sign_fixed(np.zeros((1, 3)), np.zeros((1, 3)))[0]  # all zero: no strict sign


def test_landscape_hypotheses_are_pure():
    """No hypothesis writes into the instance (the old assume_feasible stored inst['sol'])."""
    from checks.harness import _contexts

    for tid in ("no-stationary-points", "overparam-landscape"):
        cls = REGISTRY[tid]
        thm = cls()
        gens, ctxs = _contexts(cls, [0], profile="quick", seed=0, device="cpu", data=None)
        inst = thm.instance(gens[0], ctxs[0])
        state = thm.prepare([inst], ctxs)[0]
        before = copy.deepcopy({k: v for k, v in vars(inst).items() if k != "data"})
        keys, data = set(vars(inst)), inst.data
        for _, fn in cls._methods("assume_"):
            fn(thm, inst, state, ctxs[0])
        assert set(vars(inst)) == keys and inst.data is data
        assert {k: v for k, v in vars(inst).items() if k != "data"} == before


# -- overparam-landscape ---------------------------------------------------------------------------------
def test_overparam_landscape_passes_on_the_papers_construction():
    r = run_theorem(REGISTRY["overparam-landscape"], profile="quick", seed=0)
    assert r.verdict == "PASS", r.reasons
    assert r.metrics["identity_rel_err"]["max"] < 1e-9
    assert r.metrics["construction_residual"]["max"] < 1e-10
    # the paper's claim needs d >= n only: instances with T > d are in the family and pass
    assert r.metrics["d_over_n"]["min"] == 1.0


def test_overparam_landscape_control_fails_at_d_equal_n_minus_1():
    from checks.harness import _contexts
    from checks.theorems.overparam_landscape import RESID_TOL, construct

    cls = REGISTRY["overparam-landscape-control"]
    r = run_theorem(cls, profile="quick", seed=0)
    assert r.verdict == "FAIL" and r.counts["refuted"] == r.counts["instances"]
    gens, ctxs = _contexts(cls, [0, 1, 2], profile="quick", seed=0, device="cpu", data=None)
    for g, c in zip(gens, ctxs, strict=True):
        data = cls().instance(g, c).data
        assert data.d == data.n - 1
        _, rel, lower = construct(data)
        assert rel > RESID_TOL and lower > RESID_TOL  # refuted by the certificate, not by the residual alone


def test_overparam_landscape_refutes_noop_gd_and_a_wrong_gradient(monkeypatch):
    from checks.theorems import overparam_landscape as mod

    with monkeypatch.context() as mp:
        mp.setattr(mod, "run_gd", _fake_gd("noop"))
        r = run_theorem(REGISTRY["overparam-landscape"], profile="quick", seed=0)
        assert r.verdict == "FAIL" and any("norm_diverges" in k for k in r.reasons)
    real = att.grad_from_weights
    with monkeypatch.context() as mp:
        mp.setattr(att, "grad_from_weights", lambda X, Z, c: 1.05 * real(X, Z, c))
        r = run_theorem(REGISTRY["overparam-landscape"], profile="quick", seed=0)
        assert r.verdict == "FAIL" and any("descent_everywhere" in k for k in r.reasons)
