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
