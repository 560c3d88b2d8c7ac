"""Bench group ``ntp``: batched next-token-prediction GD (numerics.ntp_gd.run_ntp_gd, one run_gd call over
every instance of one shape) against the naive per-instance autograd loop, in the same run (issue 25)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import NTP_TARGET, NTP_W_RTOL, Bench, Row, _fmt_s, _log, _sync, _timeit


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


def bench_ntp(b: Bench) -> None:
    from numerics.ntp import random_ntp, smoothness_bound
    from numerics.ntp_gd import run_ntp_gd

    sz = b.sizes
    n, T, K, d = sz.ntp_shape
    R, steps = sz.ntp_instances, sz.ntp_steps
    rng = np.random.default_rng(1)
    datas = [random_ntp(rng, n, T, K, d, kind="cyclic")[0] for _ in range(R)]
    lrs = [1.0 / smoothness_bound(x) for x in datas]
    run_ntp_gd(datas[:2], steps=3, lr=lrs[:2], device=b.device)  # warm-up (allocator, dispatch)
    _log(f"ntp: ours, {R} instances x {steps} plain steps in one batched run")
    t_ours, res = _timeit(lambda: run_ntp_gd(datas, steps=steps, lr=lrs, record_at=[steps], device=b.device))
    _sync(b.device)
    k = min(sz.ntp_naive_subset, R)
    _log(f"ntp: naive autograd loop, {k} of {R} instances (extrapolated per instance)")
    times, errs = [], []
    for i in range(k):
        t_i, Wn = _timeit(lambda i=i: naive_ntp_gd(datas[i], steps=steps, lr=lrs[i]))
        times.append(t_i)
        W = res.W_traj[-1, i]
        errs.append(float(np.abs(W - Wn).max() / max(np.abs(Wn).max(), 1e-300)))
    per_naive = float(np.mean(times))
    t_naive = per_naive * R
    ratio = t_naive / t_ours
    err = float(max(errs))
    b.results["ntp"] = {
        "shape": {"n": n, "T": T, "K": K, "d": d}, "instances": R, "steps": steps, "ours_s": t_ours,
        "naive_per_instance_s": per_naive, "naive_measured_instances": k, "naive_extrapolated_s": t_naive,
        "ratio": ratio, "target": NTP_TARGET, "W_rel_err_max": err,
        "ours_us_per_step": t_ours / steps * 1e6, "naive_us_per_step": per_naive / steps * 1e6,
    }
    for key in ("ours_s", "naive_extrapolated_s", "ratio", "W_rel_err_max"):
        b.record("ntp", "W", key, b.results["ntp"][key])
    ok = ratio >= NTP_TARGET and err <= NTP_W_RTOL
    b.rows.append(Row("ntp", f"NTP GD: {R} inst x {steps} steps (n{n} T{T} K{K} d{d}), run_gd",
                      _fmt_s(t_ours), f"{_fmt_s(t_naive)} (x{R}/{k} extrap.)", f"{ratio:.0f}x",
                      f">= {NTP_TARGET:.0f}x", f"final W rel. err {err:.1e} (<= {NTP_W_RTOL:g})", ok))
