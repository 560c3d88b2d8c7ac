r"""Next-token prediction with one self-attention layer (Li, Huang, Ildiz, Rawat, Oymak, AISTATS 2024,
arXiv 2403.08081): the dataset, its token-priority graphs, the graph-SVM and the finite part.

Model. A vocabulary of K tokens with embeddings E (K, d); a sequence i is token ids t_i1..t_iT, X_i = E[t_i],
the query is the last token x̄_i = E[t_iT]. Attention s_i = softmax(X_i W x̄_i); the model's probability of
vocabulary token k is the attention mass on the positions holding k, ŷ_ik = Σ_τ s_iτ 1{t_iτ = k}; the loss
is L(W) = (1/n) Σ_i −log ŷ_{i,y_i}, the label y_i occurring in its own sequence (realisability).

Token-priority graph. For each last token k, G^(k) has an edge y_i → j for every token j ≠ y_i of a sequence i
ending in k. Its strongly connected components (SCCs) order the tokens: y ≍ j (same SCC) or y ⇒ j (y reaches
j, not back).

Graph-SVM. W^svm = argmin ‖W‖ s.t. (E_y − E_j)^T W E_k = 0 for every edge y → j of G^(k) inside one SCC, and
≥ 1 for every edge between two SCCs (Frobenius, or nuclear). Edges suffice: along a path of G^(k) the margins
add, so the constraint for every reachable pair is implied.

Finite part. S_fin = span{(E_i − E_j) E_k^T : i, j in one SCC of G^(k)} (orthogonal to W^svm, whose equality
rows are exactly these). Once the lower-priority tokens' probabilities vanish, sequence i sees only the
positions whose token lies in the SCC C_i of its label, and the loss GD's finite part descends is

    L_fin(W) = (1/n) Σ_i [ LSE_{τ : t_iτ ∈ C_i} (x_iτ^T W x̄_i) − LSE_{τ : t_iτ = y_i} (x_iτ^T W x̄_i) ],

which depends on W only through its projection onto S_fin; W^fin = argmin_{W ∈ S_fin} L_fin (unique where
L_fin is strictly convex on S_fin; decided per instance by its Hessian). The solve is numpy + scipy,
independent of the torch loss GD runs on (:mod:`numerics.ntp_gd`).

Example
-------
>>> import numpy as np
>>> E = np.eye(4)
>>> data = NTPData(E, [[0, 1, 3], [1, 0, 3], [2, 0, 3]], [0, 1, 2])
>>> [list(c) for c in priority_graphs(data)[3].components]
[[2], [0, 1], [3]]
>>> sol = graph_svm(data)
>>> sol.status, sol.certificate.verified
('optimal', True)
"""

from __future__ import annotations

import io
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .data import AttentionData, _float64_note, _to_numpy, read_npz
from .errors import InvalidInputError, SolverError
from .fileio import write_bytes
from .svm.att import _solve_rows
from .svm.core import Certificate, _bases, _certify, _reduced_features, _Rows, _tight_settings

NTP_KEYS = ("E", "tokens", "labels")

#: The finite-part solve stops at |∇L_fin| ≤ FIN_GTOL (BFGS, then Newton steps on a problem of at most a few
#: dozen coordinates with O(1) curvature): the minimiser is then exact to ~1e-10.
FIN_GTOL = 1e-11
#: Two starts that end farther apart than this (‖·‖_F) mean L_fin has no unique minimiser on S_fin.
FIN_UNIQUE_TOL = 1e-6
#: A coordinate of W^fin beyond this: the minimiser runs off to infinity (no finite minimiser). Log-ratios
#: of 40 are probabilities of e^{-40}.
FIN_UNBOUNDED = 40.0


# ================================================================================================
# the dataset
# ================================================================================================


def _ids(name: str, a: Any) -> np.ndarray:
    """An integer id array (int64, read-only), or a one-line error: ragged, non-integer, non-numeric."""
    if hasattr(a, "detach") and hasattr(a, "cpu"):
        a = a.detach().cpu().numpy()
    try:
        arr = np.asarray(a)
    except ValueError:
        raise InvalidInputError(f"{name} is a ragged array (rows of different lengths)") from None
    if arr.dtype == object:
        raise InvalidInputError(f"{name} is a ragged or non-numeric array (dtype object)")
    if arr.size == 0:
        raise InvalidInputError(f"{name} is empty (shape {arr.shape})")
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)))
        where = ""
        if bad.size:
            at = [int(i) for i in np.unravel_index(bad[0], arr.shape)]
            where = f": {name}{at} = {float(arr.flat[bad[0]])!r} is not an integer id"
        raise InvalidInputError(f"{name} must hold integer ids (int64), got dtype {arr.dtype}{where}")
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(f"{name} must hold integer ids (int64), got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise InvalidInputError(f"{name} has ids beyond int64")
    out = arr.astype(np.int64, copy=True)
    out.setflags(write=False)
    return out


class NTPData:
    """One next-token-prediction dataset (E, tokens, labels), validated on construction, read-only.

    E (K, d) float64 embeddings; tokens (n, T) int64 ids in [0, K), T ≥ 2; labels (n,) int64 ids in [0, K),
    each occurring in its own sequence."""

    __slots__ = ("E", "tokens", "labels", "notes")
    #: the format tag the harness matches against a theorem's ``data_kind`` (AttentionData has none:
    #: "attention")
    data_kind = "ntp"

    def __init__(self, E: Any, tokens: Any, labels: Any):
        E = _to_numpy("E", E)
        if E.ndim != 2:
            raise InvalidInputError(f"E must have shape (K, d), got {E.ndim}-D shape {E.shape}")
        tokens, labels = _ids("tokens", tokens), _ids("labels", labels)
        if tokens.ndim != 2:
            raise InvalidInputError(f"tokens must have shape (n, T), got {tokens.ndim}-D shape "
                                    f"{tokens.shape}")
        n, T = tokens.shape
        if T < 2:
            raise InvalidInputError(f"tokens must have at least T=2 positions per sequence, got T={T}")
        if labels.shape != (n,):
            raise InvalidInputError(f"labels must have shape (n,) = ({n},) to match tokens, got "
                                    f"{labels.shape}")
        K = E.shape[0]
        for name, arr in (("tokens", tokens), ("labels", labels)):
            bad = np.flatnonzero((arr < 0) | (arr >= K))
            if bad.size:
                idx = np.unravel_index(bad[0], arr.shape)
                raise InvalidInputError(f"{name}{list(map(int, idx))} = {int(arr[idx])} is out of range: ids "
                                        f"must lie in [0, K) = [0, {K})")
        absent = [i for i in range(n) if labels[i] not in tokens[i]]
        if absent:
            i = absent[0]
            raise InvalidInputError(f"labels[{i}] = {int(labels[i])} does not occur in its sequence "
                                    f"{tokens[i].tolist()} (realisability)")
        self.E, self.tokens, self.labels = E, tokens, labels
        self.notes: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def T(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def K(self) -> int:
        return int(self.E.shape[0])

    @property
    def d(self) -> int:
        return int(self.E.shape[1])

    @property
    def last(self) -> np.ndarray:
        """(n,) the last token of each sequence (the query's id)."""
        return self.tokens[:, -1]

    @property
    def X(self) -> np.ndarray:
        """(n, T, d) the embedded sequences."""
        return self.E[self.tokens]

    @property
    def query(self) -> np.ndarray:
        """(n, d) x̄_i = E[t_iT]."""
        return self.E[self.last]

    def __repr__(self) -> str:
        return f"NTPData(n={self.n}, T={self.T}, K={self.K}, d={self.d})"

    def to_npz_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, E=self.E, tokens=self.tokens, labels=self.labels)
        return buf.getvalue()

    def save(self, path: str | os.PathLike) -> None:
        """Write the NTP .npz contract (E float64, tokens int64, labels int64), atomically."""
        write_bytes(path, self.to_npz_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike) -> NTPData:
        """Read an NTP .npz (keys E, tokens, labels). Never unpickles; every malformed file gets one line."""
        path = Path(path)
        arrays = read_npz(path, NTP_KEYS, NTP_KEYS)
        try:
            note = _float64_note("E", arrays["E"])
            data = cls(arrays["E"], arrays["tokens"], arrays["labels"])
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: {exc}") from None
        data.notes = (f"{path}: {note}",) if note else ()
        return data


def is_ntp_file(path: str | os.PathLike) -> bool:
    """Does ``path`` hold an NTP dataset (any of the keys E, tokens, labels)? False for anything else,
    including unreadable files (whose loader then reports the problem)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return bool(set(npz.files) & set(NTP_KEYS))
    except Exception:
        return False


def load_dataset(path: str | os.PathLike) -> AttentionData | NTPData:
    """The dataset of ``path``: :class:`NTPData` when it has NTP keys, else :class:`AttentionData`."""
    return NTPData.load(path) if is_ntp_file(path) else AttentionData.load(path)


# ================================================================================================
# token-priority graphs
# ================================================================================================


@dataclass(frozen=True)
class PriorityGraph:
    """G^(k): nodes (the token ids of the sequences ending in k, sorted), edges y → j, and its SCCs in
    topological order of the condensation (a component before every component it reaches; ties by smallest
    id)."""

    k: int
    nodes: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    components: tuple[tuple[int, ...], ...]

    def component_of(self, token: int) -> int:
        return next(c for c, comp in enumerate(self.components) if token in comp)

    def same(self, a: int, b: int) -> bool:
        return self.component_of(a) == self.component_of(b)

    @property
    def cyclic(self) -> bool:
        return any(len(c) > 1 for c in self.components)


def _sccs(nodes: list[int], edges: list[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
    """SCCs of a small digraph (scipy), in topological order of the condensation, ties by smallest id."""
    pos = {v: i for i, v in enumerate(nodes)}
    m = len(nodes)
    rows = [pos[a] for a, _ in edges]
    cols = [pos[b] for _, b in edges]
    adj = csr_matrix((np.ones(len(edges)), (rows, cols)), shape=(m, m))
    _, lab = connected_components(adj, directed=True, connection="strong")
    comps: dict[int, list[int]] = {}
    for v, c in zip(nodes, lab, strict=True):
        comps.setdefault(int(c), []).append(v)
    succ: dict[int, set[int]] = {c: set() for c in comps}
    indeg = dict.fromkeys(comps, 0)
    for a, b in edges:
        ca, cb = int(lab[pos[a]]), int(lab[pos[b]])
        if ca != cb and cb not in succ[ca]:
            succ[ca].add(cb)
            indeg[cb] += 1
    order: list[tuple[int, ...]] = []
    ready = sorted((min(comps[c]), c) for c in comps if indeg[c] == 0)
    while ready:
        _, c = ready.pop(0)
        order.append(tuple(sorted(comps[c])))
        for c2 in succ[c]:
            indeg[c2] -= 1
            if indeg[c2] == 0:
                ready.append((min(comps[c2]), c2))
        ready.sort()
    return tuple(order)


def priority_graphs(data: NTPData, *, flip: bool = False) -> dict[int, PriorityGraph]:
    """{k: G^(k)} for every last token k present. ``flip``: every edge reversed (j → y), a boundary
    control."""
    out = {}
    for k in sorted(set(data.last.tolist())):
        idx = np.flatnonzero(data.last == k)
        nodes = sorted(set(data.tokens[idx].ravel().tolist()))
        edges = sorted({(int(data.labels[i]), int(j)) for i in idx for j in data.tokens[i]
                        if j != data.labels[i]})
        if flip:
            edges = sorted((b, a) for a, b in edges)
        out[int(k)] = PriorityGraph(int(k), tuple(nodes), tuple(edges), _sccs(nodes, edges))
    return out


def scc_json(graphs: dict[int, PriorityGraph]) -> dict[str, list[list[int]]]:
    """The ``scc`` object of ``attnsvm svm --json``: {str(k): [sorted component, ...]} in topological
    order."""
    return {str(k): [list(c) for c in g.components] for k, g in graphs.items()}


# ================================================================================================
# the graph-SVM (and TLTO's single-token Att-SVM, its boundary control)
# ================================================================================================


@dataclass(frozen=True)
class GraphSVMResult:
    """A certified graph-SVM answer: status "optimal" (W, objective = the norm) or "infeasible" (Farkas)."""

    status: str
    W: np.ndarray | None
    objective: float
    norm: str
    certificate: Certificate
    solver: str
    seconds: float
    graphs: dict[int, PriorityGraph]
    n_equalities: int
    n_inequalities: int

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"


def graph_rows(data: NTPData, graphs: dict[int, PriorityGraph], *, equalities: bool = True) -> _Rows:
    """Rows ⟨(E_y − E_j) E_k^T, W⟩ = 0 (edge inside an SCC) or ≥ 1 (edge between SCCs) for every edge of
    every G^(k). ``equalities=False`` makes every edge a strict ≥ 1 row (TLTO's single-token Att-SVM with the
    label as the selected token: the equality rows dropped)."""
    D, Z, b, eq = [], [], [], []
    for k, g in graphs.items():
        for y, j in g.edges:
            same = equalities and g.same(y, j)
            D.append(data.E[y] - data.E[j])
            Z.append(data.E[k])
            b.append(0.0 if same else 1.0)
            eq.append(same)
    d = data.d
    if not D:
        return _Rows(np.zeros((0, d)), np.zeros((0, d)), np.zeros(0), np.zeros(0, dtype=bool))
    return _Rows(np.array(D), np.array(Z), np.array(b), np.array(eq, dtype=bool))


def _nuclear_with_equalities(rows: _Rows, reduced: bool = True
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """min ‖W‖_* s.t. the rows (≥ and =), the primal SDP by cvxpy + Clarabel at tight settings; returns
    (W, λ ≥ 0 of the inequality rows, μ of the equality rows, solver name). The multipliers are cvxpy's
    duals in the certifier's sign convention (∂‖W‖_* ∋ Σ λ F + Σ μ F_eq)."""
    import cvxpy as cp

    d = rows.D.shape[1]
    # every minimiser is U M V^T: projecting onto the spans keeps the rows and does not raise ‖·‖_*
    U, V = _bases(rows) if reduced else (np.eye(d), np.eye(d))
    F = _reduced_features(rows, U, V)
    W = cp.Variable((U.shape[1], V.shape[1]))
    w = cp.vec(W, order="C")
    ineq, eqr = ~rows.eq, rows.eq
    cons = []
    if ineq.any():
        cons.append(F[ineq] @ w >= rows.b[ineq])
    if eqr.any():
        cons.append(F[eqr] @ w == rows.b[eqr])
    prob = cp.Problem(cp.Minimize(cp.normNuc(W)), cons)
    try:
        prob.solve(solver="CLARABEL", **_tight_settings("CLARABEL"))
    except cp.error.SolverError as exc:
        raise SolverError(f"graph-SVM (nuclear): {exc}", status="solver_error", solver="clarabel") from None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"graph-SVM (nuclear): solver status {prob.status}", status=str(prob.status),
                          solver="clarabel")
    lam = np.asarray(cons[0].dual_value, dtype=float).ravel() if ineq.any() else np.zeros(0)
    mu = -np.asarray(cons[-1].dual_value, dtype=float).ravel() if eqr.any() else np.zeros(0)
    lam = np.maximum(lam, 0.0)
    S = np.zeros(len(rows.b))
    S[ineq], S[eqr] = lam, mu
    dual = float(np.linalg.norm(rows.adjoint(S), 2))
    if dual > 1.0:  # scaled into the dual feasible set: still a weak-duality bound, b^T λ / ‖Σ λ F‖₂
        lam, mu = lam / dual, mu / dual
    M = _feasible_polish(np.asarray(W.value, dtype=float), F, rows)
    return U @ M @ V.T, lam, mu, f"clarabel-primal+{'reduced' if reduced else 'full'}+polish"


def _feasible_polish(W: np.ndarray, F: np.ndarray, rows: _Rows) -> np.ndarray:
    """An interior-point answer made exactly feasible: projected onto the equality rows' null space (they are
    homogeneous, b = 0), then scaled so the least inequality margin is 1. Both moves are O(the solver's
    residual), so the objective moves by as much (relative) and the certificate's gap absorbs it."""
    w = W.ravel()
    if rows.eq.any():
        Fe = F[rows.eq]
        w = w - np.linalg.pinv(Fe) @ (Fe @ w)
    if (~rows.eq).any():
        m = float(np.min(F[~rows.eq] @ w))
        if m > 0:
            w = w / m
    return w.reshape(W.shape)


def graph_svm(data: NTPData, *, norm: str = "fro", graphs: dict[int, PriorityGraph] | None = None,
              equalities: bool = True) -> GraphSVMResult:
    """The graph-SVM of ``data`` (module docstring), certified by the one certifier
    (:func:`numerics.svm.core._certify`: KKT for Frobenius, SDP duality for nuclear, Farkas when infeasible).
    Feasibility is decided by the Frobenius core for both norms. ``graphs``: other priority graphs (e.g.
    flipped); ``equalities=False``: TLTO's single-token Att-SVM (see :func:`graph_rows`). Raises
    :class:`SolverError` when no answer certifies."""
    if norm not in ("fro", "nuc"):
        raise InvalidInputError(f"norm must be 'fro' or 'nuc', got {norm!r}")
    graphs = priority_graphs(data) if graphs is None else graphs
    rows = graph_rows(data, graphs, equalities=equalities)
    t0 = time.perf_counter()
    n_eq, n_in = int(rows.eq.sum()), int((~rows.eq).sum())
    if not len(rows.b):
        cert = Certificate("kkt", True, message="no constraints")
        return GraphSVMResult("optimal", np.zeros((data.d, data.d)), 0.0, norm, cert, "trivial",
                              time.perf_counter() - t0, graphs, 0, 0)
    status, W, lam, mu, name, _ = _solve_rows(rows, norm="fro", solver=None)
    cert = _certify(rows, W, lam, mu, status, "fro")
    if status == "optimal" and norm == "nuc":
        for reduced in (True, False):  # the reduced SDP, then the full one as the fallback rung
            W, lam, mu, name = _nuclear_with_equalities(rows, reduced)
            cert = _certify(rows, W, lam, mu, status, "nuc")
            if cert.verified:
                break
    if not cert.verified:
        raise SolverError(f"graph-SVM ({norm}): certificate did not verify ({cert.summary()})",
                          status="uncertified", solver=name)
    if W is None:
        obj = np.inf
    else:
        obj = float(np.linalg.norm(W)) if norm == "fro" else float(np.linalg.svd(W, compute_uv=False).sum())
    return GraphSVMResult(status, W, obj, norm, cert, name, time.perf_counter() - t0, graphs, n_eq, n_in)


# ================================================================================================
# the finite part
# ================================================================================================


@dataclass(frozen=True)
class NTPFinitePart:
    """W^fin = argmin_{W ∈ S_fin} L_fin(W) and what the solve found."""

    W: np.ndarray  # (d, d), in S_fin
    basis: np.ndarray  # (m, d, d) orthonormal basis of S_fin (m = 0: acyclic, S_fin = {0})
    loss_value: float
    grad_norm: float
    curvature: float  # smallest eigenvalue of L_fin's Hessian on S_fin at W (strict convexity: > 0)
    unique: bool  # two starts agree, |∇| ≤ FIN_GTOL·10 and the minimiser is finite
    message: str

    def project(self, W: Any) -> np.ndarray:
        """Π_{S_fin} W (batched over leading axes)."""
        return project(self.basis, W)


def project(basis: np.ndarray, W: Any) -> np.ndarray:
    """Orthogonal projection onto span(basis) (orthonormal (m, d, d)); W (..., d, d)."""
    W = np.asarray(W, dtype=float)
    if not len(basis):
        return np.zeros_like(W)
    return np.einsum("...k,kde->...de", np.einsum("kde,...de->...k", basis, W), basis)


def fin_basis(data: NTPData, graphs: dict[int, PriorityGraph] | None = None) -> np.ndarray:
    """Orthonormal basis (m, d, d) of S_fin = span{(E_i − E_j) E_k^T : i, j in one SCC of G^(k)}."""
    graphs = priority_graphs(data) if graphs is None else graphs
    d = data.d
    rows = [np.outer(data.E[c[0]] - data.E[t], data.E[k]).ravel()
            for k, g in graphs.items() for c in g.components for t in c[1:]]
    if not rows:
        return np.zeros((0, d, d))
    U, s, _ = np.linalg.svd(np.array(rows).T, full_matrices=False)
    m = int(np.sum(s > max(len(rows), d * d) * np.finfo(float).eps * s[0]))
    return U[:, :m].T.reshape(m, d, d)


def _fin_masks(data: NTPData, graphs: dict[int, PriorityGraph], positions: str) -> tuple[np.ndarray, ...]:
    """(keep (n, T), label (n, T)) position masks of L_fin: keep = positions whose token lies in the label's
    SCC (``positions="scc"``) or every position (``"all"``, the wrong partition of the boundary control)."""
    lab = data.tokens == data.labels[:, None]
    if positions == "all":
        return np.ones_like(lab), lab
    if positions != "scc":
        raise InvalidInputError(f"positions must be 'scc' or 'all', got {positions!r}")
    keep = np.zeros_like(lab)
    for i in range(data.n):
        g = graphs[int(data.last[i])]
        comp = g.components[g.component_of(int(data.labels[i]))]
        keep[i] = np.isin(data.tokens[i], comp)
    return keep, lab


def _lse(a: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise log-sum-exp over the masked entries and the softmax over them (zeros elsewhere)."""
    a = np.where(mask, a, -np.inf)
    m = a.max(axis=1, keepdims=True)
    e = np.exp(a - m)
    s = e.sum(axis=1, keepdims=True)
    return (m + np.log(s))[:, 0], e / s


def fin_loss(data: NTPData, basis: np.ndarray, keep: np.ndarray, lab: np.ndarray):
    """f(β) = (L_fin, ∇_β L_fin) at W = Σ_k β_k B_k (numpy, independent of the torch loss)."""
    X, q, n = data.X, data.query, data.n

    def f(beta):
        W = np.einsum("k,kde->de", beta, basis)
        sc = np.einsum("itd,de,ie->it", X, W, q)
        l_all, s = _lse(sc, keep)
        l_lab, r = _lse(sc, lab)
        G = np.einsum("itd,it,ie->de", X, s - r, q) / n
        return float(np.mean(l_all - l_lab)), np.einsum("kde,de->k", basis, G)

    return f


def _fin_hessian(f, beta: np.ndarray) -> np.ndarray:
    """L_fin's Hessian on S_fin at β: central differences of the analytic gradient (error O(h²) ~ 1e-10),
    symmetrised."""
    h = 1e-5
    H = np.array([(f(beta + h * e)[1] - f(beta - h * e)[1]) / (2 * h) for e in np.eye(len(beta))])
    return 0.5 * (H + H.T)


def _hessian_min(f, beta: np.ndarray) -> float:
    return float(np.linalg.eigvalsh(_fin_hessian(f, beta)).min())


def finite_part(data: NTPData, graphs: dict[int, PriorityGraph] | None = None, *, positions: str = "scc",
                seed: int = 0) -> NTPFinitePart:
    """W^fin = argmin_{W ∈ S_fin} L_fin(W) (module docstring). BFGS from β = 0 and from a random start, then
    Newton steps; ``unique`` when both end at |∇| ≤ 10 FIN_GTOL within FIN_UNIQUE_TOL of each other, inside
    |β| ≤ FIN_UNBOUNDED, with a positive smallest Hessian eigenvalue (strict convexity at the minimiser).
    ``positions="all"``: the finite part of the wrong partition (every position kept)."""
    graphs = priority_graphs(data) if graphs is None else graphs
    basis = fin_basis(data, graphs)
    m = len(basis)
    if m == 0:
        return NTPFinitePart(np.zeros((data.d, data.d)), basis, 0.0, 0.0, 0.0, True,
                             "acyclic: S_fin = {0}")
    keep, lab = _fin_masks(data, graphs, positions)
    f = fin_loss(data, basis, keep, lab)
    starts = [np.zeros(m), np.random.default_rng(seed).standard_normal(m)]
    sols = []
    for b0 in starts:
        r = minimize(f, b0, jac=True, method="BFGS", options={"gtol": FIN_GTOL, "maxiter": 5000})
        sols.append(_newton(f, r.x))
    best = min(sols, key=lambda b: f(b)[0])
    gnorm = float(np.linalg.norm(f(best)[1]))
    spread = max(float(np.linalg.norm(b - best)) for b in sols)
    bounded = float(np.max(np.abs(best))) <= FIN_UNBOUNDED
    curv = _hessian_min(f, best)
    unique = bounded and spread <= FIN_UNIQUE_TOL and gnorm <= 10 * FIN_GTOL and curv > 0
    msg = ("" if unique else
           "minimiser runs off to infinity (no finite minimiser on S_fin)" if not bounded else
           f"starts disagree by {spread:.2g}, |grad| = {gnorm:.2g}, curvature {curv:.2g}: no unique finite "
           "minimiser")
    W = np.einsum("k,kde->de", best, basis)
    return NTPFinitePart(W, basis, f(best)[0], gnorm, curv, unique, msg)


def _newton(f, beta: np.ndarray, steps: int = 8) -> np.ndarray:
    """A few Newton steps (finite-difference Hessian of the analytic gradient), kept while |∇| falls."""
    h = 1e-6
    for _ in range(steps):
        g = f(beta)[1]
        if np.linalg.norm(g) <= FIN_GTOL:
            break
        H = np.array([(f(beta + h * e)[1] - f(beta - h * e)[1]) / (2 * h) for e in np.eye(len(beta))])
        try:
            step = np.linalg.solve(0.5 * (H + H.T), g)
        except np.linalg.LinAlgError:
            break
        nb = beta - step
        if not np.linalg.norm(f(nb)[1]) < np.linalg.norm(g):
            break
        beta = nb
    return beta


def fin_offset(data: NTPData, fp: NTPFinitePart, graphs: dict[int, PriorityGraph], Ws: Any) -> np.ndarray:
    """The quasi-static offset of the finite part at iterates ``Ws`` (S, d, d): δ(W) = −Σ_k β_k B_k with
    β = H⁻¹ Π g_supp(W), H the Hessian of L_fin on S_fin at W^fin (``fp.W``; central differences of the
    analytic gradient) and g_supp(W) = ∇L(W) − ∇L_fin(W) = (1/n) Σ_i (Σ_τ s_iτ x_iτ − Σ_{τ kept} s^keep_iτ
    x_iτ) x̄_iᵀ exactly (L_i − L_fin,i = log Σ_all e^ℓ − log Σ_kept e^ℓ): the gradient the tokens outside the
    label's SCC put on W, of norm ∝ their mass. Where GD's projected gradient has relaxed (Π∇L(W) ≈ 0: the
    finite part relaxes at rate η·curvature per step, far faster than the mass falls), ∇L_fin(ΠW) = −Π g_supp
    and, to first order, Π W − W^fin = δ(W) (S_fin = {0}: zeros)."""
    Ws = np.asarray(Ws, dtype=float)
    basis = fp.basis
    if not len(basis):
        return np.zeros_like(Ws)
    keep, lab = _fin_masks(data, graphs, "scc")
    f = fin_loss(data, basis, keep, lab)
    H = _fin_hessian(f, np.einsum("kde,de->k", basis, fp.W))
    sc = np.einsum("itd,sde,ie->sit", data.X, Ws, data.query)
    allm = np.ones_like(keep)
    out = np.empty_like(Ws)
    for j in range(len(Ws)):
        _, s = _lse(sc[j], allm)
        _, sk = _lse(sc[j], keep)
        g = np.einsum("itd,it,ie->de", data.X, s - sk, data.query) / data.n
        beta = np.linalg.solve(H, np.einsum("kde,de->k", basis, g))
        out[j] = -np.einsum("k,kde->de", beta, basis)
    return out


def smoothness_bound(data: NTPData) -> float:
    """An upper bound on the Lipschitz constant of ∇L: the Hessian of −log ŷ in the scores lies between
    −Cov_q and Cov_s, of norm ≤ 1/2, and W ↦ X_i W x̄_i has norm ‖X_i‖_2 ‖x̄_i‖, so
    L ≤ ½ max_i ‖X_i‖_2² ‖x̄_i‖²."""
    X, q = data.X, data.query
    return 0.5 * max(float(np.linalg.norm(X[i], 2) ** 2 * q[i] @ q[i]) for i in range(data.n))


def loss_np(data: NTPData, W: Any) -> tuple[float, np.ndarray]:
    """(L(W), ∇L(W)) in numpy: the reference the torch loss of :mod:`numerics.ntp_gd` is checked against
    (GD step fidelity) and the objective of :func:`regularization_path`."""
    W = np.asarray(W, dtype=float)
    X, q = data.X, data.query
    sc = np.einsum("itd,de,ie->it", X, W, q)
    lab = data.tokens == data.labels[:, None]
    l_all, s = _lse(sc, np.ones_like(lab))
    l_lab, r = _lse(sc, lab)
    G = np.einsum("itd,it,ie->de", X, s - r, q) / data.n
    return float(np.mean(l_all - l_lab)), G


def out_of_scc_mass(data: NTPData, W: Any, graphs: dict[int, PriorityGraph] | None = None) -> float:
    """The largest attention mass any sequence puts on positions outside its label's SCC (the tokens the
    directional part suppresses; 0 where every sequence holds only its label's SCC)."""
    graphs = priority_graphs(data) if graphs is None else graphs
    keep, _ = _fin_masks(data, graphs, "scc")
    sc = np.einsum("itd,de,ie->it", data.X, np.asarray(W, dtype=float), data.query)
    _, s = _lse(sc, np.ones_like(keep))
    return float(np.max(np.where(keep, 0.0, s).sum(axis=1)))


def hessian_np(data: NTPData, W: Any) -> np.ndarray:
    """∇²L(W) as a (d², d²) matrix (row-major vec): L = mean LSE(a_i) − a_iy + const with a_i = X_i W x̄_i
    linear in W, so ∇²L = (1/n) Σ_i F_i^T (diag s_i − s_i s_i^T) F_i, F_i's rows vec(x_iτ x̄_i^T)."""
    W = np.asarray(W, dtype=float)
    X, q, n, d = data.X, data.query, data.n, data.d
    sc = np.einsum("itd,de,ie->it", X, W, q)
    _, s = _lse(sc, np.ones(sc.shape, dtype=bool))
    F = np.einsum("itd,ie->itde", X, q).reshape(n, data.T, d * d)
    Hs = np.einsum("it,tu->itu", s, np.eye(data.T)) - np.einsum("it,iu->itu", s, s)
    return np.einsum("itp,itu,iuq->pq", F, Hs, F) / n


def _sphere_newton(value_grad, hessian, W: np.ndarray, R: float, steps: int = 20
                   ) -> tuple[np.ndarray, float, np.ndarray]:
    """Newton on the KKT system ∇L(W) + μW = 0, ‖W‖ = R (analytic gradient and Hessian: no line search on
    loss values, which float64 cannot resolve once the suppressed mass is tiny), damped on the tangential
    residual; returns (W, tangential gradient / ‖∇L‖, ∇L)."""
    shape, d2 = W.shape, W.size
    w = W.ravel().copy()

    def tangential(w):
        g = value_grad(w.reshape(shape))[1].ravel()
        u = w / np.linalg.norm(w)
        return g, float(np.linalg.norm(g - (g @ u) * u)) / max(float(np.linalg.norm(g)), 1e-300)

    g, tang = tangential(w)
    for _ in range(steps):
        if tang <= 1e-12:
            break
        mu = -float(g @ w) / (R * R)
        H = hessian(w.reshape(shape))
        J = np.block([[H + mu * np.eye(d2), w[:, None]], [w[None, :], np.zeros((1, 1))]])
        rhs = -np.concatenate([g + mu * w, [0.5 * (w @ w - R * R)]])
        try:
            dx = np.linalg.solve(J, rhs)
        except np.linalg.LinAlgError:
            break
        for t in 0.5 ** np.arange(12):  # damped: the first step that lowers the tangential residual
            w_new = w + t * dx[:d2]
            w_new *= R / np.linalg.norm(w_new)
            g_new, tang_new = tangential(w_new)
            if tang_new < tang:
                break
        if not tang_new < tang:
            break
        w, g, tang = w_new, g_new, tang_new
    return w.reshape(shape), tang, g


#: The path's answer is accepted when the gradient's component tangent to the sphere is at most PATH_KKT
#: of its norm (first-order optimality on the sphere) and it points out of the ball (μ ≥ 0: the sphere's
#: minimiser is the ball's): BFGS reaches ~1e-9, Newton ~1e-12; 1e-6 is the certifier's KKT_TOL.
PATH_KKT = 1e-6


def sphere_path(value_grad, hessian, shape: tuple[int, int], radii: Any, *, what: str = "loss"
                ) -> tuple[np.ndarray, np.ndarray]:
    """W_R = argmin_{‖W‖_F ≤ R} f(W) of a convex f without a minimiser (so W_R lies on the sphere) for each
    radius: BFGS on W = R V/‖V‖ (V free), warm-started from the previous radius, then :func:`_sphere_newton`;
    accepted when the tangential gradient is ≤ PATH_KKT of ‖∇f‖ and ⟨∇f, W⟩ ≤ 0 (f falls outward, so by
    convexity no point inside the ball is better). A radius that does not certify from the previous one is
    approached through 2, 4, then 8 equal steps (continuation: a long warm-start jump can leave BFGS where
    float64 no longer resolves the loss; measured on paper seed 0 #97, #99 at 10 → 12‖W^svm‖); SolverError
    when none certifies. Returns (W_R (J, *shape), KKT (J,))."""
    n = int(np.prod(shape))
    out, kkt = [], []
    v = np.full(n, 1.0 / np.sqrt(n))
    prev = None

    def solve_at(R, v):
        def f(x):
            nx = float(np.linalg.norm(x))
            u = x / nx
            val, G = value_grad((R * u).reshape(shape))
            g = G.ravel()
            return val, (R / nx) * (g - (g @ u) * u)

        res = minimize(f, v, jac=True, method="BFGS", options={"gtol": 1e-13, "maxiter": 20000})
        W0 = (R * res.x / np.linalg.norm(res.x)).reshape(shape)
        W, tang, g = _sphere_newton(value_grad, hessian, W0, R)
        ok = tang <= PATH_KKT and g @ W.ravel() <= 0
        return W, tang, g, ok, str(res.message)

    for R in np.asarray(radii, dtype=float):
        W, tang, g, ok, msg = solve_at(R, v)
        for parts in (2, 4, 8):
            if ok or prev is None:
                break
            w = v
            for r in np.linspace(prev, R, parts + 1)[1:]:
                W, tang, g, ok, msg = solve_at(r, w)
                w = W.ravel() / r
        if not ok:
            radial = float(g @ W.ravel()) / R
            raise SolverError(f"{what} regularisation path at R = {R:g}: not optimal on the ball (tangential "
                              f"gradient {tang:.3g} of its norm, radial {radial:.3g}; {msg})",
                              status="uncertified", solver="bfgs-sphere+newton")
        v, prev = W.ravel() / R, R
        out.append(W)
        kkt.append(tang)
    return np.array(out), np.array(kkt)


def regularization_path(data: NTPData, radii: Any) -> tuple[np.ndarray, np.ndarray]:
    """W_R = argmin_{‖W‖_F ≤ R} L(W) for each radius, (J, d, d), and each answer's KKT residual (J,).

    The NTP loss is convex in W (every label position holds the same token, so the log of the label's mass is
    a_y + log(count) − LSE(a): L = mean LSE(a_i) − a_iy + const) and, with a directional part, has no
    minimiser, so W_R lies on the sphere ‖W‖ = R (:func:`sphere_path`)."""
    return sphere_path(lambda W: loss_np(data, W), lambda W: hessian_np(data, W), (data.d, data.d), radii,
                       what="NTP")


# ================================================================================================
# the random family
# ================================================================================================

#: (n, T, K, d) of the catalogue's draws, cycled by instance (d ≥ K: linearly independent embeddings).
FAMILY_CONFIGS = ((6, 3, 5, 8), (8, 4, 5, 8), (6, 3, 6, 10), (10, 4, 6, 10))
#: Family rules (design margins): a resolvable finite part (‖W^fin‖_F ≥ FIN_MIN) with curvature of L_fin at
#: W^fin ≥ FIN_CURVATURE (a flat optimum is approached too slowly to be judged within a budget).
FIN_MIN = 0.1
FIN_CURVATURE = 1e-3


def _draw(rng: np.random.Generator, n: int, T: int, K: int, d: int, acyclic: bool) -> NTPData:
    """One draw: Gaussian embeddings (rows N(0, I/d)); one or two last tokens; for each last token a random
    partition of the vocabulary into priority levels (acyclic: singletons, a random total order); the other
    positions uniform over the vocabulary; the label uniform among the tokens of the sequence's highest level
    present (so every edge y → j goes to the same or a lower level: the levels' order is the graph's)."""
    E = rng.standard_normal((K, d)) / np.sqrt(d)
    lasts = rng.choice(K, size=int(rng.integers(1, 3)), replace=False)
    level = {}
    for k in lasts:
        perm = rng.permutation(K)
        cuts = np.arange(1, K) if acyclic else np.sort(rng.choice(np.arange(1, K), size=K // 2 - 1,
                                                                  replace=False))
        lv = np.zeros(K, dtype=int)
        for c in cuts:
            lv[perm[c:]] += 1
        level[int(k)] = lv
    tokens = np.empty((n, T), dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    for i in range(n):
        k = int(rng.choice(lasts))
        tokens[i, :-1] = rng.integers(0, K, size=T - 1)
        tokens[i, -1] = k
        lv = level[k][tokens[i]]
        top = np.unique(tokens[i][lv == lv.min()])
        labels[i] = rng.choice(top)
    return NTPData(E, tokens, labels)


def random_ntp(rng: np.random.Generator, n: int, T: int, K: int, d: int, *, kind: str = "cyclic",
               max_attempts: int = 500) -> tuple[NTPData, int]:
    """A draw of the catalogue's family (:func:`_draw`) meeting its rules by construction, and the number of
    draws it took. ``kind="cyclic"``: some G^(k) has an SCC of two or more tokens, W^svm ≠ 0 (some edge
    between SCCs), W^fin unique with ‖W^fin‖ ≥ FIN_MIN and curvature ≥ FIN_CURVATURE; ``"acyclic"``: every
    G^(k) acyclic (S_fin = {0}) and some edge. Raises InvalidInputError when no draw qualifies."""
    if kind not in ("cyclic", "acyclic"):
        raise InvalidInputError(f"kind must be 'cyclic' or 'acyclic', got {kind!r}")
    for attempt in range(1, max_attempts + 1):
        data = _draw(rng, n, T, K, d, kind == "acyclic")
        graphs = priority_graphs(data)
        strict = any(not g.same(y, j) for g in graphs.values() for y, j in g.edges)
        cyc = any(g.cyclic for g in graphs.values())
        if not strict or cyc != (kind == "cyclic"):
            continue
        if kind == "cyclic":
            fp = finite_part(data, graphs)
            if not (fp.unique and np.linalg.norm(fp.W) >= FIN_MIN and fp.curvature >= FIN_CURVATURE):
                continue
        return data, attempt
    raise InvalidInputError(f"no {kind} NTP draw with (n, T, K, d) = ({n}, {T}, {K}, {d}) in {max_attempts} "
                            "attempts")


__all__ = ["NTP_KEYS", "NTPData", "is_ntp_file", "load_dataset", "PriorityGraph", "priority_graphs",
           "scc_json", "GraphSVMResult", "graph_rows", "graph_svm", "NTPFinitePart", "fin_basis",
           "finite_part", "project", "fin_loss", "smoothness_bound", "loss_np", "out_of_scc_mass",
           "regularization_path", "sphere_path", "hessian_np", "FAMILY_CONFIGS", "random_ntp"]
