"""Gen-SVM of a trained attention (THEORY.md §3, TLTO's general SVM equivalence): token sets, the directional
part W^dir (a hard-margin SVM with equality rows, through the shared attention-row solve) and the finite part
W^fin (minimum-norm least squares), and the fit ``W^svmeq = W_fin + R W_dir``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import tolerances as tol
from ..data import AttentionData
from ..errors import InvalidInputError, SolverError
from ..tokens import softmax_probs
from .att import _solve_rows
from .core import Certificate, SVMSolution, _certify, _Rows, rank_by_gap


@dataclass(frozen=True)
class GenSVMResult:
    """Gen-SVM of a trained attention (THEORY.md §3): token sets, directional and finite parts."""

    probs: np.ndarray  # (n, T)
    selected: tuple[np.ndarray, ...]  # O_i = {t : s_it > tau_h}
    masked: tuple[np.ndarray, ...]  # Ō_i = {t : s_it ≤ tau_l}
    ambiguous: bool  # some probability strictly between tau_l and tau_h
    ambiguous_examples: tuple[int, ...]
    directional: SVMSolution  # W^dir (status "infeasible" possible)
    W_dir: np.ndarray | None
    W_fin: np.ndarray
    fin_residual: float  # max |equation residual| of the finite part (0 if consistent)
    tau_h: float
    tau_l: float



def gen_svm(data: AttentionData, W_or_probs: Any, *, kind: str = "auto", tau_h: float = tol.TAU_H,
            tau_l: float = tol.TAU_L) -> GenSVMResult:
    """Gen-SVM of a trained attention (THEORY.md §3, TLTO's general SVM equivalence).

    W_or_probs: the trained W (d, d) or the softmax probabilities (n, T); kind="W"|"probs" decides
    when the shape is ambiguous (n = T = d). Selected O_i = {s_it > tau_h}, masked Ō_i = {s_it ≤ tau_l};
    probabilities strictly between make the instance ``ambiguous`` (such tokens enter no constraint).

    W_dir = argmin ‖W‖_F s.t. (x_it − x_iτ)^T W z_i = 0 (t, τ ∈ O_i), ≥ 1 (t ∈ O_i, τ ∈ Ō_i);
    W_fin = argmin ‖W‖_F s.t. (x_iτ − x_it)^T W z_i = log(s_iτ / s_it) (t, τ ∈ O_i) (least squares).
    """
    arr = np.asarray(W_or_probs, dtype=float)
    n, T, d = data.n, data.T, data.d
    if kind == "auto":
        if arr.shape == (d, d) and arr.shape == (n, T):
            raise InvalidInputError("W_or_probs has shape (d, d) = (n, T); pass kind='W' or kind='probs'")
        kind = "W" if arr.shape == (d, d) else "probs"
    if kind == "W":
        if arr.shape != (d, d):
            raise InvalidInputError(f"W must have shape ({d}, {d}), got {arr.shape}")
        probs = softmax_probs(data, arr)
    elif kind == "probs":
        if arr.shape != (n, T):
            raise InvalidInputError(f"probs must have shape ({n}, {T}), got {arr.shape}")
        probs = arr
    else:
        raise InvalidInputError(f"kind must be 'auto', 'W' or 'probs', got {kind!r}")
    sel = tuple(np.flatnonzero(p > tau_h) for p in probs)
    msk = tuple(np.flatnonzero(p <= tau_l) for p in probs)
    amb = tuple(i for i, p in enumerate(probs) if np.any((p > tau_l) & (p <= tau_h)))
    Zq = data.Z
    Dl, Zl, bl, eql, fin_D, fin_Z, fin_b = [], [], [], [], [], [], []
    for i in range(n):
        O, Ob = sel[i], msk[i]
        t0 = O[0]
        for t in O[1:]:
            Dl.append(data.X[i, t0] - data.X[i, t])
            Zl.append(Zq[i])
            bl.append(0.0)
            eql.append(True)
            fin_D.append(data.X[i, t0] - data.X[i, t])
            fin_Z.append(Zq[i])
            fin_b.append(float(np.log(probs[i, t0] / probs[i, t])))
        for t in O:
            for tau in Ob:
                Dl.append(data.X[i, t] - data.X[i, tau])
                Zl.append(Zq[i])
                bl.append(1.0)
                eql.append(False)
    t_start = time.perf_counter()
    if Dl:
        rows = _Rows(np.array(Dl), np.array(Zl), np.array(bl), np.array(eql, dtype=bool))
        status, W, lam_r, mu, name, attempts = _solve_rows(rows, norm="fro", solver=None)
        cert = _certify(rows, W, lam_r, mu, status, "fro")
    else:
        rows = _Rows(np.zeros((0, d)), np.zeros((0, d)), np.zeros(0), np.zeros(0, dtype=bool))
        status, W, lam_r, name = "optimal", np.zeros((d, d)), np.zeros(0), "trivial"
        attempts = ()
        cert = Certificate("kkt", True, message="no constraints")
    if not cert.verified:
        raise SolverError(f"Gen-SVM directional part: certificate did not verify ({cert.summary()})",
                          status="uncertified", solver=name)
    rank, sv = rank_by_gap(W)
    directional = SVMSolution(status=status, W=W,
                              objective=float(np.linalg.norm(W)) if W is not None else np.inf,
                              lam=lam_r, support=(), rank=rank, certificate=cert, solver=name,
                              seconds=time.perf_counter() - t_start, alpha=np.array([s[0] for s in sel]),
                              singular_values=sv, attempts=attempts)
    if fin_D:
        Ff = np.einsum("md,me->mde", np.array(fin_D), np.array(fin_Z)).reshape(len(fin_b), -1)
        wf, *_ = np.linalg.lstsq(Ff, np.array(fin_b), rcond=None)  # minimum-norm solution
        W_fin = wf.reshape(d, d)
        fin_res = float(np.max(np.abs(Ff @ wf - np.array(fin_b))))
    else:
        W_fin, fin_res = np.zeros((d, d)), 0.0
    return GenSVMResult(probs=probs, selected=sel, masked=msk, ambiguous=bool(amb), ambiguous_examples=amb,
                        directional=directional, W_dir=W, W_fin=W_fin, fin_residual=fin_res, tau_h=tau_h,
                        tau_l=tau_l)


def fit_svmeq(W_fin: Any, W_dir: Any, W_gd: Any) -> tuple[float, np.ndarray]:
    """W^svmeq = W_fin + R W_dir with R = argmin_R ‖W_fin + R W_dir − W_gd‖_F; returns (R, W^svmeq)."""
    W_fin, W_dir, W_gd = (np.asarray(x, dtype=float) for x in (W_fin, W_dir, W_gd))
    nd = float(np.sum(W_dir * W_dir))
    R = 0.0 if nd == 0 else float(np.sum(W_dir * (W_gd - W_fin)) / nd)
    return R, W_fin + R * W_dir
