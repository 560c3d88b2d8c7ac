"""gd-own-selection: W-GD → Att-SVM(α) of its own selection, (K, Q)-GD → Att-SVM⋆; the cross-norm control.

The fast tests judge hand-built trajectories (a ray towards one SVM solution) with the check's own
predictions, so the rules are tested without GD: the matched claim confirms, the cross claim is refuted, and
an unstable or uncertified selection is undecided, never PASSed. The quick run is slow-marked (≈ 15 s)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from checks import catalogue
from checks.theorem import REGISTRY
from checks.theorems._global import doubling_points
from checks.theorems._norms import DIFFER_MAX, svm_corr
from checks.theorems.gd_own_selection import (
    STEPS,
    OwnSelectionInstance,
    OwnSelectionState,
    SVMPair,
    solve_pair,
)
from numerics.data import random_unit_sphere
from numerics.tokens import optimal_tokens

catalogue.load_builtin()


def _ray_state(seed: int = 0, *, towards: str = "fro", stable: bool = True):
    """A W record W(k) = r_k·Ŵ + E/r_k on the doubling grid towards the Frobenius (or nuclear) solution of
    the optimal tokens, r_k = log k (plain GD's rate); the (K, Q) record is the nuclear solution scaled. The
    starts, the step and the step fidelities, which the selection and direction rules do not read, are
    placeholders (zeros, nan)."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        data = random_unit_sphere(4, 5, 8, rng=rng)
        alpha = optimal_tokens(data).index
        pair = solve_pair(data, alpha)
        if svm_corr(pair.W("fro"), pair.W("nuc")) < DIFFER_MAX:
            break
    S = STEPS["quick"]
    its = np.array(sorted({*range(0, S + 1, S // 32), S}))
    idx = doubling_points(its, S)
    W = pair.W(towards) / np.linalg.norm(pair.W(towards))
    E = rng.standard_normal(W.shape)
    traj = np.stack([np.log(k) * W + 0.05 * E / np.log(k) for k in its[idx]])
    kq = np.stack([t * pair.W("nuc") for t in np.linspace(1, 20, 21)])
    zero = np.zeros((data.d, data.d))
    return OwnSelectionInstance(data=data, W0=zero, K0=zero, Q0=zero), OwnSelectionState(
        L=float("nan"), lr=float("nan"), steps=S,
        w_traj=traj, w_its=its[idx], w_alpha=alpha, w_stable=stable, w_pair=pair,
        kq_traj=kq, kq_alpha=alpha, kq_stable=True, kq_mass=1.0, kq_pair=pair,
        fidelity=float("nan"), kq_fidelity=float("nan"),
    )


@pytest.mark.parametrize("name", ["w_direction", "w_separation", "kq_direction", "kq_separation"])
def test_matched_norms_confirm_and_the_cross_norm_control_is_refuted(name):
    inst, st = _ray_state()
    thm, ctl = REGISTRY["gd-own-selection"](), REGISTRY["gd-own-selection-control"]()
    assert getattr(thm, f"check_{name}")(inst, st, None).status == "held"
    want = "undecided" if name == "w_direction" else "failed"  # the W direction waits (1/log²k rate)
    assert getattr(ctl, f"check_{name}")(inst, st, None).status == want


def test_a_run_towards_the_nuclear_solution_refutes_the_w_claim():
    """W-GD converging to W^mm_⋆,α instead: the separation stalls on the wrong side of the midpoint."""
    inst, st = _ray_state(towards="nuc")
    out = REGISTRY["gd-own-selection"]().check_w_separation(inst, st, None)
    assert out.status == "failed" and "nearer the nuclear solution" in out.reason


def test_an_unstable_or_uncertified_selection_is_undecided():
    inst, st = _ray_state(stable=False)
    thm = REGISTRY["gd-own-selection"]()
    for name in ("w_selection", "w_direction", "w_separation"):
        out = getattr(thm, f"check_{name}")(inst, st, None)
        assert out.status == "undecided" and "not stable" in out.reason
    inst, st = _ray_state()
    st = replace(st, kq_mass=0.9)  # no clear (K, Q) selection
    assert thm.check_kq_direction(inst, st, None).status == "undecided"
    st = replace(st, kq_mass=1.0, kq_pair=SVMPair(st.w_pair.fro, None))  # Att-SVM⋆ not solved
    assert "feasible" in thm.check_kq_separation(inst, st, None).reason


@pytest.mark.slow
def test_gd_own_selection_quick():
    from checks.harness import run_theorem

    r = run_theorem(REGISTRY["gd-own-selection"], profile="quick")
    assert r.verdict == "PASS", r.counts
    c = run_theorem(REGISTRY["gd-own-selection-control"], profile="quick")
    assert c.verdict == "FAIL" and c.counts["refuted"] == c.counts["instances"], c.counts
