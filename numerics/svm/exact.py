"""Exact rational proofs of Frobenius Att-SVM answers (``solve_att_svm(..., exact=True)``).

Every float64 is a dyadic rational, so the data converted exactly and the active set reported by the float
solve give a linear system over Q: KKT optimality (or a Farkas vector) is then proved or refuted with no
rounding at all; the result is recorded in ``Certificate.exact``.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from .core import Certificate, _Rows


def _dyadic(a: np.ndarray) -> tuple[list, int]:
    """Floats → Python ints times 2^-K exactly (every float64 is a dyadic rational)."""
    fr = [Fraction(float(x)) for x in np.asarray(a, dtype=float).ravel()]
    K = max((f.denominator.bit_length() - 1 for f in fr), default=0)
    return [int(f * (1 << K)) for f in fr], K


def _rref(M: list[list[Fraction]], ncols: int) -> tuple[list[list[Fraction]], list[int]]:
    """Reduced row echelon form over Q of an augmented matrix (pivots searched in the first ncols)."""
    M = [row[:] for row in M]
    piv, r = [], 0
    for c in range(ncols):
        p = next((i for i in range(r, len(M)) if M[i][c] != 0), None)
        if p is None:
            continue
        M[r], M[p] = M[p], M[r]
        inv = 1 / M[r][c]
        M[r] = [x * inv for x in M[r]]
        for i in range(len(M)):
            if i != r and M[i][c] != 0:
                f = M[i][c]
                M[i] = [x - f * y for x, y in zip(M[i], M[r], strict=True)]
        piv.append(c)
        r += 1
    return M, piv


def _solve_exact(G: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """Solve G x = rhs over Q (free variables 0). None if inconsistent."""
    k = len(rhs)
    R, piv = _rref([row[:] + [rhs[i]] for i, row in enumerate(G)], k)
    if any(R[i][k] != 0 for i in range(len(piv), k)):
        return None
    x = [Fraction(0)] * k
    for i, c in enumerate(piv):
        x[c] = R[i][k]
    return x


def _exact_att(data, a, rows: _Rows, lam: np.ndarray, status: str, cert: Certificate) -> Certificate:
    """Prove optimality (or infeasibility) in exact arithmetic on the float data converted exactly.

    Optimal: with S = {λ_s > 0}, solve G_SS λ_S = 1 over Q (G = Gram of features), set
    W = Σ_S λ_s F_s; proved iff λ_S ≥ 0 and every margin G_{s,S} λ_S ≥ 1 (KKT, exactly).
    Infeasible: proved iff the Farkas support has an exact null vector λ_S > 0 of G_SS (Σλ F = 0).
    """
    Dint, K1 = _dyadic(rows.D)
    Zint, K2 = _dyadic(rows.Zq)
    m, d = rows.D.shape
    Dr = [Dint[s * d:(s + 1) * d] for s in range(m)]
    Zr = [Zint[s * d:(s + 1) * d] for s in range(m)]
    scale = 1 << (2 * (K1 + K2))  # features F_s = (D_int z_int^T) / 2^(K1+K2); Gram scaled by scale

    def gram(s, t):
        return sum(x * y for x, y in zip(Dr[s], Dr[t], strict=True)) * sum(
            x * y for x, y in zip(Zr[s], Zr[t], strict=True))

    S = [int(s) for s in np.flatnonzero(lam > 1e-9 * max(float(np.max(lam, initial=0.0)), 1e-300))]
    if not S:
        return _replace(cert, exact=False, message="exact: empty support")
    GSS = [[Fraction(gram(s, t)) for t in S] for s in S]
    if status == "optimal":
        x = _solve_exact(GSS, [Fraction(scale)] * len(S))  # λ scaled: G/scale λ = 1
        if x is None:
            return _replace(cert, exact=False, message="exact: active-set system inconsistent")
        if any(v < 0 for v in x):
            return _replace(cert, exact=False, message="exact: a multiplier is negative")
        for t in range(m):
            if sum(gram(t, s) * v for s, v in zip(S, x, strict=True)) < scale:
                return _replace(cert, exact=False, message=f"exact: constraint row {t} has margin < 1")
        return _replace(cert, exact=True, message="exact: KKT proved over Q")
    # infeasible: G_SS λ = 0 with λ ≥ 0, λ ≠ 0 means ‖Σ λ_s F_s‖² = λ^T G λ = 0, i.e. Σ λ_s F_s = 0
    k = len(S)
    R, piv = _rref(GSS, k)
    free = [c for c in range(k) if c not in piv]
    if len(free) == 1:
        v = [Fraction(0)] * k
        v[free[0]] = Fraction(1)
        for i, c in enumerate(piv):
            v[c] = -R[i][free[0]]
        if all(x >= 0 for x in v) or all(x <= 0 for x in v):
            return _replace(cert, exact=True, message="exact: Farkas vector proved over Q")
    return _replace(cert, exact=False, message=f"exact: support null space has dimension {len(free)}, "
                    "no nonnegative exact Farkas vector found")


def _replace(cert: Certificate, **kw) -> Certificate:
    return replace(cert, **kw)
