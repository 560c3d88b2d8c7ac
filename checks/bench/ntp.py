"""Bench group ``ntp``: batched next-token-prediction GD (numerics.ntp_gd.run_ntp_gd, and the linear model's
numerics.ntp_linear.run_linear_gd: one run_gd call over every instance of one shape) against the naive
per-instance autograd loop, in the same run (issue 25)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import NTP_TARGET, NTP_W_RTOL, Bench, Row, _corr, _fmt_s, _log, _sync, _timeit


def naive_ntp_gd(data: Any, *, steps: int, lr: float) -> np.ndarray:
    """One NTP dataset, torch autograd, a plain Python loop (the research-code way): L(W) = mean_i
    −log Σ_τ softmax(X_i W x̄_i)_τ 1{t_iτ = y_i}, W ← W − lr ∇L from W = 0. Returns the final W (d, d)."""
    import torch

    X = torch.tensor(np.array(data.X, dtype=np.float64))
    q = torch.tensor(np.array(data.query, dtype=np.float64))
    lab = torch.tensor(data.tokens == data.labels[:, None], dtype=torch.float64)
    W = torch.zeros(data.d, data.d, dtype=torch.float64, requires_grad=True)
    for _ in range(steps):
        s = torch.softmax(torch.einsum("itd,de,ie->it", X, W, q), dim=-1)
        loss = -torch.log((s * lab).sum(-1)).mean()
        (g,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            W -= lr * g
    return W.detach().numpy().copy()


def naive_linear_ntp_gd(prob: Any, *, steps: int, lr: float) -> np.ndarray:
    """One linear NTP problem, torch autograd, a plain Python loop: CE(W) = Σ_j π_j Σ_z −p̂_jz
    log softmax(W h̄_j)_z, W ← W − lr ∇CE from W = 0. Returns the final W (V, d)."""
    import torch

    H, P, pi = (torch.tensor(np.array(a, dtype=np.float64)) for a in (prob.H, prob.P, prob.pi))
    W = torch.zeros(prob.V, prob.d, dtype=torch.float64, requires_grad=True)
    for _ in range(steps):
        loss = (pi * -(P * torch.log_softmax(H @ W.T, dim=-1)).sum(-1)).sum()
        (g,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            W -= lr * g
    return W.detach().numpy().copy()


def _measure(b: Bench, key: str, ours, naive, R: int, k: int, target: float = NTP_TARGET) -> dict[str, Any]:
    """Time ``ours()`` (the batched run: final W (R, ...)) and ``naive(i)`` on k of the R instances (final W),
    extrapolated per instance; the largest relative difference of the final W and the smallest correlation
    (final direction)."""
    _log(f"{key}: ours, {R} instances in one batched run")
    t_ours, W = _timeit(ours)
    _sync(b.device)
    _log(f"{key}: naive autograd loop, {k} of {R} instances (extrapolated per instance)")
    times, errs, corrs = [], [], []
    for i in range(k):
        t_i, Wn = _timeit(lambda i=i: naive(i))
        times.append(t_i)
        errs.append(float(np.abs(W[i] - Wn).max() / max(np.abs(Wn).max(), 1e-300)))
        corrs.append(_corr(np.asarray(W[i]), Wn))
    per_naive = float(np.mean(times))
    return {"ours_s": t_ours, "naive_per_instance_s": per_naive, "naive_measured_instances": k,
            "naive_extrapolated_s": per_naive * R, "ratio": per_naive * R / t_ours, "target": target,
            "W_rel_err_max": float(max(errs)), "corr_min": float(min(corrs))}


def bench_ntp(b: Bench) -> None:
    from numerics.ntp import random_ntp, smoothness_bound
    from numerics.ntp_gd import run_ntp_gd
    from numerics.ntp_linear import random_linear_ntp, run_linear_gd, smoothness

    sz = b.sizes
    n, T, K, d = sz.ntp_shape
    R, steps = sz.ntp_instances, sz.ntp_steps
    rng = np.random.default_rng(1)
    datas = [random_ntp(rng, n, T, K, d, kind="cyclic")[0] for _ in range(R)]
    lrs = [1.0 / smoothness_bound(x) for x in datas]
    run_ntp_gd(datas[:2], steps=3, lr=lrs[:2], device=b.device)  # warm-up (allocator, dispatch)
    k = min(sz.ntp_naive_subset, R)
    out: dict[str, Any] = {"shape": {"n": n, "T": T, "K": K, "d": d}, "instances": R, "steps": steps}
    out["ntp"] = _measure(
        b, "ntp",
        lambda: run_ntp_gd(datas, steps=steps, lr=lrs, record_at=[steps], device=b.device).W_traj[-1],
        lambda i: naive_ntp_gd(datas[i], steps=steps, lr=lrs[i]), R, k)
    m, dl, V = sz.ntp_linear_shape
    probs = [random_linear_ntp(np.random.default_rng(s), m, dl, V) for s in range(R)]
    llrs = [1.0 / (2 * smoothness(p)) for p in probs]
    out["linear_shape"] = {"m": m, "d": dl, "V": V}
    out["linear"] = _measure(
        b, "ntp linear",
        lambda: run_linear_gd(probs, steps=steps, lr=llrs, record_at=[steps], device=b.device).W_traj[-1],
        lambda i: naive_linear_ntp_gd(probs[i], steps=steps, lr=llrs[i]), R, k)
    b.results["ntp"] = out
    for name, what in (("ntp", f"NTP GD: {R} inst x {steps} steps (n{n} T{T} K{K} d{d}), run_gd"),
                       ("linear", f"linear NTP GD: {R} inst x {steps} steps (m{m} d{dl} V{V}), run_gd")):
        r = out[name]
        for key in ("ours_s", "naive_extrapolated_s", "ratio", "W_rel_err_max"):
            b.record("ntp", name, key, r[key])
        ok = r["ratio"] >= NTP_TARGET and r["W_rel_err_max"] <= NTP_W_RTOL
        b.rows.append(Row("ntp", what, _fmt_s(r["ours_s"]),
                          f"{_fmt_s(r['naive_extrapolated_s'])} (x{R}/{k} extrap.)", f"{r['ratio']:.0f}x",
                          f">= {NTP_TARGET:.0f}x",
                          f"final W rel. err {r['W_rel_err_max']:.1e} (<= {NTP_W_RTOL:g})", ok))
