"""Bench group ``md``: batched ℓp mirror descent (numerics.gd.run_gd with geometry numerics.gd.Mirror, one
call over every instance of one shape, as md-global / md-global-normalized run it: on CPU the compiled kernel
numerics.kernels.md_steps, on CUDA the fused tensor program numerics.gd_torch.run_mirror) against the naive
per-instance autograd loop with the mirror step written by hand (core.naive_gd with ``mirror_p``), in the same
run (issue 25)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import GD_CORR_MIN, MD_TARGET, MD_W_RTOL, Bench, Row, _fmt_s, naive_gd
from .ntp import _measure

#: (key, p, normalised) of the rows: plain mirror descent (the theorem's algorithm, md-global) at p = 3 and
#: p = 1.75 (the md checks' exponents other than 2, where the step is plain GD), and the normalised variant
#: (md-global-normalized, md-local) at p = 3.
RUNS = (("p3", 3.0, False), ("p1.75", 1.75, False), ("p3-normalized", 3.0, True))


def md_family(n: int, T: int, d: int, R: int, seed: int = 1) -> tuple[list, np.ndarray]:
    """R instances of the md checks' B.2 family (checks.strategies.b2_data(n, T, d)) and their small random
    starts W(0) = INIT_SCALE N(0, 1) (R, d, d), as checks.theorems._mirror draws them."""
    from checks.strategies import b2_data
    from checks.theorems._global import INIT_SCALE

    rng = np.random.default_rng(seed)
    datas = [b2_data(n, T, d, rng=rng) for _ in range(R)]
    return datas, INIT_SCALE * rng.standard_normal((R, d, d))


def ours_md(datas: list, W0: np.ndarray, *, p: float, normalized: bool, steps: int, lr: float,
            device: str = "cpu") -> np.ndarray:
    """One batched run_gd call with Mirror(p, normalized) over every instance; the final W (R, d, d)."""
    from numerics.gd import GDConfig, Mirror, run_gd

    cfg = GDConfig(steps=steps, lr=lr, geometry=Mirror(p, normalized=normalized))
    return run_gd(datas, cfg, init=W0, device=device).W


def naive_md(data: Any, W0: np.ndarray, *, p: float, normalized: bool, steps: int, lr: float) -> np.ndarray:
    """One instance, torch autograd for ∇L and the mirror step by hand (core.naive_gd); the final W (d, d)."""
    return naive_gd(data.X, data.Y, data.Z, data.v, W0, param="W", steps=steps, lr=lr, mirror_p=p,
                    normalized=normalized)


def bench_md(b: Bench) -> None:
    from checks.theorems._mirror import ETA, ETA_N
    from numerics import kernels
    from numerics.gd import warm_kernels

    sz = b.sizes
    n, T, d = sz.md_shape
    R, steps = sz.md_instances, sz.md_steps
    datas, W0 = md_family(n, T, d, R)
    k = min(sz.md_naive_subset, R)
    ours_md(datas[:2], W0[:2], p=3.0, normalized=False, steps=3, lr=ETA, device=b.device)  # warm-up (torch)
    if b.device == "cpu" and kernels.available():  # the compiled mirror kernel (run_gd takes it on CPU)
        warm_kernels([(n, T, d, d)], params=("mirror",))
    out: dict[str, Any] = {"shape": {"n": n, "T": T, "d": d}, "instances": R, "steps": steps}
    for key, p, normalized in RUNS:
        lr = ETA_N if normalized else ETA  # the md checks' step sizes (checks.theorems._mirror)
        out[key] = _measure(
            b, f"md {key}",
            lambda p=p, normalized=normalized, lr=lr: ours_md(datas, W0, p=p, normalized=normalized,
                                                              steps=steps, lr=lr, device=b.device),
            lambda i, p=p, normalized=normalized, lr=lr: naive_md(datas[i], W0[i], p=p, normalized=normalized,
                                                                  steps=steps, lr=lr),
            R, k, target=MD_TARGET)
        out[key].update(p=p, normalized=normalized, lr=lr)
    b.results["md"] = out
    path = "kernel md_steps" if b.device == "cpu" and kernels.available() else "fused run_mirror"
    for key, p, normalized in RUNS:
        r = out[key]
        for metric in ("ours_s", "naive_extrapolated_s", "ratio", "W_rel_err_max", "corr_min"):
            b.record("md", key, metric, r[metric])
        what = (f"{'normalised ' if normalized else ''}l{p:g} mirror descent: {R} inst x {steps} steps "
                f"(n{n} T{T} d{d}, η {r['lr']:g}), run_gd Mirror ({path})")
        if normalized:  # the same final direction (core.MD_W_RTOL: rounding amplified at zero crossings)
            agree = r["corr_min"] >= GD_CORR_MIN
            check = f"final W corr {r['corr_min']:.10f} (> {GD_CORR_MIN}), rel. err {r['W_rel_err_max']:.1e}"
        else:
            agree = r["W_rel_err_max"] <= MD_W_RTOL
            check = f"final W rel. err {r['W_rel_err_max']:.1e} (<= {MD_W_RTOL:g})"
        b.rows.append(Row("md", what, _fmt_s(r["ours_s"]),
                          f"{_fmt_s(r['naive_extrapolated_s'])} (x{R}/{k} extrap.)", f"{r['ratio']:.0f}x",
                          f">= {MD_TARGET:.0f}x", check, r["ratio"] >= MD_TARGET and agree))
