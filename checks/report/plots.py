"""figures/*.png: one figure per theorem, the curves and metrics of its instances."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from numerics.fileio import write_bytes

from ..harness import SIZE_KEYS, InstanceResult, TheoremResult
from .model import (
    _fmt_threshold,
    safe_name,
)

COLORS = {"confirmed": "tab:green", "refuted": "tab:red", "vacuous": "tab:gray", "inconclusive": "tab:orange",
          "error": "black"}


def _num(y: Any) -> float:
    return float(y) if isinstance(y, (int, float)) and not isinstance(y, bool) else float("nan")


def curve_series(results: Sequence[InstanceResult], curve: str) -> list[dict[str, Any]]:
    """The data of one ``*_curve`` panel: per instance, x (the GD iteration when the instance records
    ``<name>_iterations`` or ``iterations`` of the same length; the radius R of a regularisation path
    when it records ``<name>_radii``; the dimension d when it records ``<name>_d``; else the record
    index), y, outcome, and ``xlabel``."""
    base = curve[: -len("_curve")] if curve.endswith("_curve") else curve
    out = []
    for r in results:
        ys = r.metrics.get(curve)
        if not (isinstance(ys, list) and ys):
            continue
        xs, label = r.metrics.get(f"{base}_iterations", r.metrics.get("iterations")), "GD iteration"
        radii = r.metrics.get(f"{base}_radii")
        if not (isinstance(xs, list) and len(xs) == len(ys)) and isinstance(radii, list):
            xs, label = radii, "radius R"
        dims = r.metrics.get(f"{base}_d")
        if not (isinstance(xs, list) and len(xs) == len(ys)) and isinstance(dims, list):
            xs, label = dims, "d"
        by_iter = isinstance(xs, list) and len(xs) == len(ys)
        out.append(
            {
                "instance": r.instance,
                "outcome": r.outcome,
                "iterations": by_iter,
                "xlabel": label if by_iter else "record index",
                "x": [_num(x) for x in xs] if by_iter else list(range(len(ys))),
                "y": [_num(y) for y in ys],
            }
        )
    return out


def _thresholds(t: TheoremResult, metric: str) -> list[tuple[float, str]]:
    return [(float(c["value"]), f"{c['rule'].strip()} {_fmt_threshold(c['value'])}") for c in t.criteria
            if c.get("plot_metric") == metric and isinstance(c.get("value"), (int, float))
            and not isinstance(c.get("value"), bool)]


def _set_yscale(ax: Any, vals: Sequence[float], error_like: bool) -> str:
    """log for an error metric or positive values spanning > 3 decades; symlog when values of both signs
    (or zeros) span > 3 decades; linear otherwise. Returns the scale set."""
    a = np.asarray([v for v in vals if np.isfinite(v)], dtype=float)
    if a.size == 0:
        return "linear"
    nz = np.abs(a[a != 0])
    span = nz.size and nz.max() / nz.min() > 1e3
    if (a > 0).all() and (error_like or span):
        ax.set_yscale("log")
        return "log"
    if span:
        from matplotlib.ticker import FixedLocator

        lin = float(nz.min())
        lo, hi = int(np.ceil(np.log10(lin))), int(np.floor(np.log10(nz.max())))
        # at most ~8 labelled decades: a tick every `step` decades; the linear part around 0 as wide as a step
        step = max(1, int(np.ceil((hi - lo + 1) / 8)))
        ax.set_yscale("symlog", linthresh=lin, linscale=float(step))
        pos = [10.0 ** k for k in range(lo, hi + 1, step)]
        ticks = [0.0] + pos + ([-x for x in pos if x <= -a.min()] if a.min() < 0 else [])
        ax.yaxis.set_major_locator(FixedLocator(sorted(ticks)))
        ax.yaxis.set_minor_locator(FixedLocator([]))
        if a.min() >= 0:
            ax.set_ylim(bottom=-0.5 * lin)  # no empty negative half for non-negative values
        return "symlog"
    if error_like and (a > 0).any():
        ax.set_yscale("log")  # zeros (exact agreement) drop out of a log axis; they are below every threshold
        return "log"
    return "linear"


def _error_like(name: str) -> bool:
    return "err" in name.lower()


def _plain_log_labels(ax: Any) -> None:
    """Plain-text tick labels ("0.001", "1e-05") on log and symlog axes instead of matplotlib's mathtext ones
    ($10^{-5}$): the same ticks, and laying out mathtext was ~20 % of the time a figure took (text metrics of
    every label, twice: tight_layout and savefig; 64 quick-profile figures 10.7 → 8.7 s of CPU)."""
    from matplotlib.ticker import FuncFormatter, LogFormatter, LogLocator, NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() in ("log", "symlog"):
            axis.set_major_formatter(LogFormatter())
            axis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    if ax.xaxis.get_scale() == "log":
        # a horizontal axis has no room for every minor label (gd-own-selection's 3000 … 64000: "30004000
        # 6000 10000 2e+04 4e+04 6e+04" ran together): labelled ticks at 1, 2, 5 × 10^k, the others unlabelled
        ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())


def _legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels, strict=True):
        seen.setdefault(lab, h)
    if seen:
        ax.legend(list(seen.values()), list(seen), fontsize=7)


def plot_theorem(out: Path, cls: Any, t: TheoremResult, results: Sequence[InstanceResult]) -> Path | None:
    """One small figure per theorem: its plot metric per instance, and up to two ``*_curve`` series
    against the GD iteration (see :func:`curve_series`), instances coloured by outcome, the criteria's
    thresholds as dashed lines, log scales where values are errors or span more than three decades."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    path = out / "figures" / f"{safe_name(t.id)}.png"
    metric = getattr(cls, "plot_metric", None)
    if metric is None:
        metric = next((k for r in results for k, v in r.metrics.items() if k not in SIZE_KEYS
                       and isinstance(v, (int, float)) and not isinstance(v, bool)), None)
    curves: list[str] = []
    for r in results:
        for k, v in r.metrics.items():
            if k.endswith("_curve") and isinstance(v, list) and k not in curves:
                curves.append(k)
    curves = curves[:2]
    has_metric = metric is not None and any(np.isfinite(_num(r.metrics.get(metric))) for r in results)
    panels = ([metric] if has_metric else []) + curves
    if not results or not panels:
        path.unlink(missing_ok=True)  # no stale figure from an earlier run in this folder
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.0), squeeze=False)
    axes = axes[0]
    for ax, name in zip(axes, panels, strict=True):
        vals: list[float] = []
        if name == metric:
            for outcome, c in COLORS.items():
                pts = [(r.instance, _num(r.metrics.get(metric))) for r in results if r.outcome == outcome]
                pts = [p for p in pts if np.isfinite(p[1])]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.scatter(xs, ys, s=14, color=c, label=outcome)
                    vals += ys
            ax.set_xlabel("instance")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        else:
            series = curve_series(results, name)
            for s in series:
                ax.plot(
                    s["x"], s["y"], color=COLORS.get(s["outcome"], "k"), alpha=0.6, lw=1, label=s["outcome"]
                )
                vals += s["y"]
            iters = bool(series) and all(s["iterations"] for s in series)
            labels = {s["xlabel"] for s in series}
            ax.set_xlabel(labels.pop() if iters and len(labels) == 1 else "record index")
            xs = [x for s in series for x in s["x"] if np.isfinite(x)]
            if iters and xs and min(xs) > 0 and max(xs) >= 10 * min(xs):
                ax.set_xscale("log")  # iterates recorded on a geometric grid (k = S/32, …, S): log k
        # a rule on a final value (metric X) also marks the panel of its curve X_curve
        base = name[: -len("_curve")] if name != metric and name.endswith("_curve") else None
        for y, lab in _thresholds(t, name) + (_thresholds(t, base) if base else []):
            ax.axhline(y, color="k", ls="--", lw=1, label=f"threshold {lab}")
            vals.append(y)
        scale = (getattr(cls, "plot_scales", None) or {}).get(name)
        if scale:  # the theorem's choice for this metric (Theorem.plot_scales)
            ax.set_yscale(scale)
        else:
            _set_yscale(ax, vals, _error_like(name))
        _plain_log_labels(ax)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=8)
        _legend(ax)
    fig.suptitle(f"{t.id}: {t.verdict} (expected {t.expected})", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    write_bytes(path, buf.getvalue())
    return path
