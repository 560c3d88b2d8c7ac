"""The bench suite's outputs (table, figure, bench.json/csv/md) and its entry points."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from numerics.errors import InvalidInputError
from numerics.fileio import write_bytes, write_text

from .core import (
    _CLOCK,
    FULL,
    GD_CORR_MIN,
    GD_TARGET,
    GROUPS,
    OPT_IN_GROUPS,
    QUICK,
    SVM_FRO_TARGET,
    SVM_NUC_MAX_SLOWDOWN,
    Bench,
    _log,
    _one_thread,
    machine,
)
from .gd import bench_gd, bench_gd_curve
from .md import bench_md
from .ntp import bench_ntp
from .svm import bench_svm, bench_svm_curve
from .system import bench_catalogue, bench_profiles, bench_startup

# -- outputs ------------------------------------------------------------------------------------------

def render_table(b: Bench) -> str:
    m = b.results["machine"]
    head = (
        f"attnsvm bench ({'quick' if b.sizes is QUICK else 'full'}) on {m['cpu']}, {m['cores']} cores, "
        f"device {b.device}, torch {m['torch']}, float64; 1 thread per side (torch.set_num_threads(1), "
        f"BLAS limited to 1 thread); times: {m['clock']}, minimum over repeats; naive = per-instance "
        "baseline "
        "implemented in checks/bench/core.py (GD: torch autograd loop) or checks/bench_naive.py."
    )
    cols = ["group", "benchmark", "ours", "naive", "ratio", "target", "check", "met"]
    lines = [head, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in b.rows:
        met = "-" if r.ok is None else ("yes" if r.ok else "NO")
        lines.append(
            "| " + " | ".join([r.group, r.name, r.ours, r.naive, r.ratio, r.target, r.check, met]) + " |"
        )
    return "\n".join(lines) + "\n"


def render_figure(b: Bench) -> bytes | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [g for g in ("gd-curve", "svm-curve", "catalogue") if g in b.results
              and not b.results[g].get("skipped")]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, g in zip(axes[0], panels, strict=True):
        res = b.results[g]
        if g == "gd-curve":
            bes = res.get("backends", ["torch"])
            for param, col in (("W", "C0"), ("KQ", "C1")):
                ax.loglog(
                    res["R"], np.array(res[param]) * 1e6, "o-", color=col, label=f"ours ({bes[0]}), {param}"
                )
                for be in bes[1:]:
                    ax.loglog(res["R"], np.array(res[f"{param}-{be}"]) * 1e6, "^:", color=col, alpha=0.7,
                              label=f"ours ({be} path), {param}")
                ax.axhline(
                    res["naive"][param] * 1e6, color=col, ls="--", label=f"naive autograd loop, {param}"
                )
            ax.set_xlabel("instances in one batch R")
            ax.set_ylabel("time per instance-step [us]")
            s = res["shape"]
            ax.set_title(f"batched GD cost ({res['device']}, n={s['n']} T={s['T']} d={s['d']})")
            ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.0, 0.92))  # below the naive lines
        elif g == "svm-curve":
            x = [n * T * d for n, T, d in res["shapes"]]
            for key, col, ls, lab in (
                ("fro", "C0", "o-", "ours, Frobenius"),
                ("nuc", "C1", "o-", "ours, nuclear"),
                ("naive_fro", "C0", "s--", "naive cvxpy loop, Frobenius"),
                ("naive_nuc", "C1", "s--", "naive cvxpy loop, nuclear"),
            ):
                ax.loglog(x, res[key], ls, color=col, label=lab)
            for norm, col in (("fro", "C0"), ("nuc", "C1")):  # shapes with solver errors: x, with the count
                errs = res.get("solver_errors", {}).get(norm, [])
                bad = [(xi, len(e)) for xi, e in zip(x, errs, strict=False) if e]
                if bad:
                    ymin = np.nanmin([v for k in ("fro", "nuc") for v in res[k]] or [1e-3])
                    ax.scatter([p for p, _ in bad], [ymin] * len(bad), marker="x", color=col, s=50,
                               label=f"solver errors ({norm}): {sum(k for _, k in bad)}")
            ax.set_xlabel("problem size n*T*d  (n=T, d=2n)")
            ax.set_ylabel("solve time [s]")
            ax.set_title("Att-SVM solve time")
        else:
            items = list(res["with_control_s"].items())[::-1]
            ax.barh([t for t, _ in items], [s for _, s in items], color="C2", label="theorem + control")
            ax.axvline(8.0, color="k", ls=":", label="8 s budget")
            ax.set_xscale("log")
            ax.set_xlabel("quick-profile seconds (sum over instances)")
            ax.set_title(f"catalogue, total {res['total_s']:.0f} s")
            ax.tick_params(axis="y", labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend() is None:
            ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def write_outputs(b: Bench) -> None:
    b.out.mkdir(parents=True, exist_ok=True)
    write_text(b.out / "bench.json", json.dumps(b.results, indent=1, default=float) + "\n")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["group", "name", "metric", "value"])
    w.writerows(b.flat)
    write_text(b.out / "bench.csv", buf.getvalue())
    write_text(b.out / "bench.md", render_table(b))
    png = render_figure(b)
    if png is not None:
        write_bytes(b.out / "bench.png", png)


# -- entry point --------------------------------------------------------------------------------------

#: Each group's runner (``catalogue``: bench_catalogue, the fallback).
RUNNERS = {"gd": bench_gd, "svm": bench_svm, "gd-curve": bench_gd_curve, "svm-curve": bench_svm_curve,
           "ntp": bench_ntp, "md": bench_md, "startup": bench_startup, "profiles": bench_profiles}

def run_bench(*, quick: bool = False, device: str = "cpu", out: str | os.PathLike = "reports/bench",
              only: list[str] | tuple[str, ...] = ()) -> Bench:
    """Run the selected groups and write the outputs; returns the :class:`Bench` with every number."""
    bad = [g for g in only if g not in GROUPS + OPT_IN_GROUPS]
    if bad:
        raise InvalidInputError(
            f"unknown bench group(s) {', '.join(map(repr, bad))}; expected some of "
            f"{', '.join(GROUPS + OPT_IN_GROUPS)}"
        )
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InvalidInputError(f"--device {device}: CUDA is not available on this machine")
    elif device != "cpu":
        raise InvalidInputError(f"--device must be cpu or cuda, got {device!r}")
    groups = list(only) if only else list(GROUPS)
    b = Bench(sizes=QUICK if quick else FULL, device=device, out=Path(out))
    b.results["machine"] = machine(device)
    b.results["sizes"] = asdict(b.sizes)
    b.results["targets"] = {"gd_ratio": GD_TARGET, "svm_fro_ratio": SVM_FRO_TARGET,
                            "svm_nuc_max_slowdown": SVM_NUC_MAX_SLOWDOWN, "gd_corr_min": GD_CORR_MIN}
    if device.startswith("cuda"):
        _CLOCK.update(name="wall clock", fn=time.perf_counter)
    else:
        _CLOCK.update(name="process CPU time", fn=time.process_time)
    b.results["machine"]["clock"] = _CLOCK["name"]
    t0 = time.perf_counter()
    with _one_thread():
        for g in GROUPS + OPT_IN_GROUPS:
            if g not in groups:
                continue
            _log(f"group {g}")
            RUNNERS.get(g, bench_catalogue)(b)
            write_outputs(b)  # after every group: an interrupted bench keeps what finished
    b.results["seconds"] = time.perf_counter() - t0
    write_outputs(b)
    return b


def cmd_bench(args) -> int:
    b = run_bench(quick=args.quick, device=args.device, out=args.out, only=args.only)
    print(render_table(b), end="")
    print(
        f"\nwrote {b.out / 'bench.json'}, bench.csv, bench.md"
        + (", bench.png" if (b.out / "bench.png").exists() else "")
        + f"  ({b.results['seconds']:.1f} s)"
    )
    return 0
