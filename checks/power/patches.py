"""The bugs of the SVM, softmax, mask, optimal-token, gradient and rank sabotages of
:mod:`checks.power.sabotage`: factories that take the original function and return the broken replacement
(the catalogue, the components, the GD sabotages and the injection machinery live in
:mod:`checks.power.sabotage`). Never import these into normal code paths: they are for power analysis only."""

from __future__ import annotations

import dataclasses

#: ``scaled-svm``: the factor applied to the solver's answer (feasible, not optimal).
SCALE = 1.05


# -- SVM solvers (inside, before the certificate) ----------------------------------------------------

def _scaled_core(original):
    def _hard_margin_core(*args, **kwargs):
        core = original(*args, **kwargs)
        return core if core.w is None else dataclasses.replace(core, w=SCALE * core.w)

    return _hard_margin_core


def _scaled_lp(original):
    def _solve_cvxpy(*args, **kwargs):
        status, W, lam = original(*args, **kwargs)
        return status, (None if W is None else SCALE * W), lam

    return _solve_cvxpy


# The nuclear seam is the whole certified ladder (numerics.svm.nuclear._solve_nuclear_ladder): each rung is
# certified inside it (and Newton-polished, which would undo a perturbed SDP answer), so a wrong answer must
# leave the ladder to be a bug that only solve_att_svm's final certificate can catch.
def _scaled_nuclear(original):
    def _solve_nuclear_ladder(*args, **kwargs):
        W, lam, name, attempts = original(*args, **kwargs)
        return SCALE * W, lam, name, attempts

    return _solve_nuclear_ladder


def _binding_row(lam) -> int | None:
    import numpy as np

    lam = np.asarray(lam, dtype=float)
    return int(np.argmax(lam)) if lam.size >= 2 and float(lam.max()) > 0 else None


def _dropped_core(original):
    """Solve, then solve again without the constraint of largest multiplier (a binding one)."""
    import numpy as np

    def _hard_margin_core(A, b, E=None, e=None, *, solver=None):
        core = original(A, b, E, e, solver=solver)
        j = _binding_row(core.lam) if core.status == "optimal" else None
        if j is None:
            return core
        keep = np.arange(len(b)) != j
        c2 = original(np.asarray(A)[keep], np.asarray(b)[keep], E, e, solver=solver)
        lam = np.zeros(len(b))
        lam[keep] = c2.lam
        return dataclasses.replace(c2, lam=lam)

    return _hard_margin_core


def _dropped_nuclear(original):
    import numpy as np

    def _solve_nuclear_ladder(rows, rungs, cache):
        W, lam, name, attempts = original(rows, rungs, cache)
        j = _binding_row(lam)
        if j is None:
            return W, lam, name, attempts
        keep = np.arange(len(rows.b)) != j
        sub = dataclasses.replace(rows, D=rows.D[keep], Zq=rows.Zq[keep], b=rows.b[keep], eq=rows.eq[keep])
        W, lam_k, name, attempts = original(sub, rungs, {})  # a fresh cache: the features of the kept rows
        lam = np.zeros(len(rows.b))
        lam[keep] = lam_k
        return W, lam, name, attempts

    return _solve_nuclear_ladder


def _fro_for_nuclear(original):
    """The nuclear solver answers with the Frobenius solution of the same (reduced) rows."""

    def _solve_nuclear_ladder(rows, rungs, cache):
        from numerics.svm import core

        U, V = core._bases(rows)
        c = core._hard_margin_core(core._reduced_features(rows, U, V), rows.b)
        W = U @ c.w.reshape(U.shape[1], V.shape[1]) @ V.T
        return W, c.lam, "fro-as-nuc", ("fro-as-nuc: sabotaged",)

    return _solve_nuclear_ladder


def _lax(original):
    def certify(*args, **kwargs):
        return dataclasses.replace(original(*args, **kwargs), verified=True)

    return certify


# -- softmax, mask, tokens, gradient, rank -----------------------------------------------------------

def _np_rows_unnormalised(original):
    import numpy as np

    def softmax_rows(logits):
        return np.exp(logits - logits.max(axis=-1, keepdims=True))  # the division by the row sum is missing

    return softmax_rows


def _rows_unnormalised(original):
    def softmax_rows(lg):
        return (lg - lg.amax(-1, keepdim=True)).exp()  # the division by the row sum is missing

    return softmax_rows


def _mask_off(original):
    def causal_mask(T, device="cpu"):
        import torch

        return torch.ones((T, T), dtype=torch.bool, device=device)

    return causal_mask


def _seq_svm_mask_off(original):
    def solve_seq_svm(X, gamma, *, causal=False, alpha=None, solver=None):
        return original(X, gamma, causal=False, alpha=alpha, solver=solver)

    return solve_seq_svm


def _argmin_tokens(original):
    import numpy as np

    def optimal_tokens(data, *, v=None, tie_tol=None):
        from numerics import tokens

        ot = original(data, v=v) if tie_tol is None else original(data, v=v, tie_tol=tie_tol)
        return dataclasses.replace(ot, index=np.argmin(tokens.scores(data, v), axis=1))

    return optimal_tokens


def _transposed(original):
    def grad_from_weights(X, Z, c):
        return original(X, Z, c).mT.clone()

    return grad_from_weights


def _absolute_rank(original):
    import numpy as np

    from numerics import tolerances as tol

    def rank_by_gap(W, rtol=tol.RANK_RTOL):
        if W is None:
            return 0, None
        s = np.linalg.svd(W, compute_uv=False)
        return int(np.sum(s > rtol)), s  # absolute threshold instead of rtol * sigma_1

    return rank_by_gap


# -- subtle bugs (issue 23 item 5): one token, one row, 10 % of a temperature ------------------------

#: ``softmax-temperature``: every softmax divides its logits by this (a stray temperature 1.1).
TEMPERATURE = 1.1


def _tempered(original):
    """The softmax seam with its logits divided by TEMPERATURE. The seam functions take the logits (or, in
    the older signatures ``softmax(X, Z, W)`` and ``softmax_probs(data, W)``, the W they are linear in) as
    their last positional argument, so one factory serves them all."""

    def tempered(*args):
        return original(*args[:-1], args[-1] / TEMPERATURE)

    return tempered


def _mask_off_by_one(original):
    def causal_mask(T, device="cpu"):
        import torch

        return torch.tril(torch.ones((T, T), dtype=torch.bool, device=device), diagonal=1)  # sees key k + 1

    return causal_mask


def _last_row_core(original):
    """The constraint set loses its last row (an off-by-one in the row builder); a no-op when it binds not."""
    import numpy as np

    def _hard_margin_core(A, b, E=None, e=None, *, solver=None):
        if len(b) < 2:
            return original(A, b, E, e, solver=solver)
        core = original(np.asarray(A)[:-1], np.asarray(b)[:-1], E, e, solver=solver)
        return dataclasses.replace(core, lam=np.append(core.lam, 0.0))

    return _hard_margin_core


def _last_row_nuclear(original):
    import numpy as np

    def _solve_nuclear_ladder(rows, rungs, cache):
        if len(rows.b) < 2:
            return original(rows, rungs, cache)
        sub = dataclasses.replace(rows, D=rows.D[:-1], Zq=rows.Zq[:-1], b=rows.b[:-1], eq=rows.eq[:-1])
        W, lam, name, attempts = original(sub, rungs, {})
        return W, np.append(lam, 0.0), name, attempts

    return _solve_nuclear_ladder


# -- next-token prediction: the graph-SVM's equality rows and the finite parts -----------------------------


def _ntp_no_equalities(original):
    """graph_rows builds TLTO's single-token rows whatever it is asked (the SCC equalities dropped)."""

    def graph_rows(data, graphs, *, equalities=True):
        return original(data, graphs, equalities=False)

    return graph_rows


def _scaled_fin(original):
    """finite_part's W^fin comes back SCALE × (the rest of its record, gradient norm included, unchanged)."""

    def finite_part(*args, **kwargs):
        res = original(*args, **kwargs)
        return dataclasses.replace(res, W=SCALE * res.W)

    return finite_part


def _scaled_w_star(original):
    """w_star's W⋆ comes back SCALE × (its reported residual unchanged)."""

    def w_star(*args, **kwargs):
        W, res = original(*args, **kwargs)
        return SCALE * W, res

    return w_star
