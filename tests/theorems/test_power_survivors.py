"""Regression tests for the survivors of the power matrix (quick profile, seed 0) that were fixed:
kq-gd-nuclear survived softmax-no-normaliser (GD with an unnormalised softmax still reaches the nuclear
direction) and gen-svm survived ascent-gd (the ranking of predictors held for an ascending optimiser). Each
theorem now certifies its optimiser step against an independent gradient (checks/theorems/_gd.py)."""

from __future__ import annotations

import numpy as np
import pytest

from checks import catalogue
from checks.harness import run_theorem
from checks.power.sabotage import sabotage
from checks.theorem import REGISTRY
from checks.theorems._gd import FIDELITY_TOL, step_fidelity, step_fidelity_kq
from numerics.data import random_unit_sphere


def _data(seed=0):
    return random_unit_sphere(3, 4, 5, rng=np.random.default_rng(seed))


def test_step_fidelity_is_one_for_the_real_steps():
    rng = np.random.default_rng(1)
    data = _data()
    W = rng.standard_normal((5, 5))
    V = rng.standard_normal((5, 5)) / np.sqrt(5)
    K, Q = rng.standard_normal((5, 5)), rng.standard_normal((5, 5))
    assert step_fidelity(data, W, 0.1) > 1 - FIDELITY_TOL
    assert step_fidelity(data, W, 0.1, V=V) > 1 - FIDELITY_TOL  # ReLU head
    assert step_fidelity_kq(data, K, Q, 0.1) > 1 - FIDELITY_TOL
    assert step_fidelity_kq(data, K, Q, 0.1, weight_decay=0.3) > 1 - FIDELITY_TOL  # the decay term is counted


@pytest.mark.parametrize("name", ["ascent-gd", "softmax-no-normaliser", "transposed-gradient"])
def test_step_fidelity_rejects_broken_steps(name):
    rng = np.random.default_rng(2)
    data = _data()
    W = rng.standard_normal((5, 5)) / 5  # unit-ish norm: softmax far from one-hot
    V = rng.standard_normal((5, 5)) / np.sqrt(5)
    K, Q = rng.standard_normal((5, 5)) / 3, rng.standard_normal((5, 5)) / 3
    with sabotage(name):
        assert step_fidelity(data, W, 0.1) < 1 - FIDELITY_TOL
        assert step_fidelity(data, W, 0.1, V=V) < 1 - FIDELITY_TOL
        assert step_fidelity_kq(data, K, Q, 0.1) < 1 - FIDELITY_TOL


@pytest.mark.parametrize("tid, name", [("kq-gd-nuclear", "softmax-no-normaliser"), ("gen-svm", "ascent-gd")])
def test_former_survivors_are_detected(tid, name):
    catalogue.load_builtin()
    cls = REGISTRY[tid]
    assert run_theorem(cls, profile="quick", seed=0).verdict == "PASS"
    with sabotage(name):
        assert run_theorem(cls, profile="quick", seed=0).verdict == "FAIL"


def test_kq_gd_nuclear_declares_only_what_it_decides_on():
    # optimal_tokens feeds a descriptive metric (alpha_is_opt), no decision: not a dependency
    catalogue.load_builtin()
    assert "optimal-token" not in REGISTRY["kq-gd-nuclear"].depends_on


def _seq_inst(causal: bool, seed: int = 3):
    """A sequence instance with independent per-position labels (the step checks read X, gamma, causal)."""
    from checks.theorems._seq import SeqInstance
    from numerics.svm import seq_scores

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2, 4, 6)) / np.sqrt(6)
    Yseq, v = rng.choice([-1.0, 1.0], size=(2, 4)), rng.standard_normal(6)
    G = seq_scores(X, Yseq, v)
    return SeqInstance(X=X, Y=Yseq[:, 0], Yseq=Yseq, v=v, gamma=G, causal=causal, probe=np.zeros((6, 6)))


@pytest.mark.parametrize("causal", [False, True])
def test_independent_sequence_gradient_matches_the_closed_form(causal):
    """_seq.independent_grad_seq (plain numpy, own masked softmax) and numerics.sequence.seq_grad are two
    float64 evaluations of the same sum: equal to rounding (1e-12 relative, O(nT²d²) terms of size ~1)."""
    import torch

    from checks.theorems._seq import independent_grad_seq
    from numerics.sequence import seq_grad

    inst = _seq_inst(causal)
    W = np.random.default_rng(4).standard_normal((6, 6))
    ref = seq_grad(*(torch.as_tensor(a[None]) for a in (inst.X, inst.gamma, W)), causal)[0].numpy()
    got = independent_grad_seq(inst.X, inst.gamma, W, causal)
    assert np.linalg.norm(got - ref) <= 1e-12 * np.linalg.norm(ref)


@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_sequence_step_fidelity(causal, normalized):
    """One for the engine's own step (plain and normalised, at W = 0 and a unit-norm W); below
    1 − FIDELITY_TOL under the step-size sabotages (length ×0.5 / ×2) and the softmax temperature (at the
    unit-norm W; at W = 0 the softmax is uniform whatever its temperature)."""
    from checks.theorems._seq import seq_step_fidelity

    inst = _seq_inst(causal)
    P = np.random.default_rng(5).standard_normal((6, 6))
    P /= np.linalg.norm(P)
    for W in (np.zeros((6, 6)), P):
        assert seq_step_fidelity(inst, W, 0.7, normalized=normalized) > 1 - FIDELITY_TOL
    for name in ("lr-half", "lr-double", "softmax-temperature"):
        with sabotage(name):
            assert seq_step_fidelity(inst, P, 0.7, normalized=normalized) < 1 - FIDELITY_TOL, name


def test_plain_kq_step_fidelity_judges_the_length():
    """kq-divergence's plain (K, Q) step (_gd.step_fidelity_kq, normalized=False): 1 for the engine's step,
    below 1 − FIDELITY_TOL for a step of half or twice the length."""
    rng = np.random.default_rng(6)
    data = _data()
    K, Q = rng.standard_normal((5, 5)) / 3, rng.standard_normal((5, 5)) / 3
    assert step_fidelity_kq(data, K, Q, 1.0, normalized=False) > 1 - FIDELITY_TOL
    for name in ("lr-half", "lr-double", "softmax-temperature"):
        with sabotage(name):
            assert step_fidelity_kq(data, K, Q, 1.0, normalized=False) < 1 - FIDELITY_TOL, name
