"""Bench groups ``catalogue``, ``profiles`` (opt-in) and ``startup``: the quick (full, paper) profile's wall
time in a fresh process, and ``--help``, ``list`` and GD in a fresh process, each against its goal."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from numerics.errors import InvalidInputError

from .core import (
    FULL,
    FULL_PROFILE_GOAL_S,
    GD_FRESH_TARGET,
    GD_LR,
    PAPER_PROFILE_GOAL_S,
    QUICK_PROFILE_GOAL_S,
    STARTUP_GOAL_S,
    Bench,
    Row,
    _fmt_s,
    _log,
    _timeit,
    naive_gd,
)
from .gd import _gd_data, _gd_init


def _catalogue_from(path: Path) -> dict[str, Any]:
    per: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError, TypeError, KeyError):
            r = json.loads(line)
            per[r["theorem"]] += float(r.get("seconds") or 0.0)
            count[r["theorem"]] += 1
    grouped: dict[str, float] = defaultdict(float)
    for tid, s in per.items():
        grouped[tid.removesuffix("-control")] += s
    return {"source": str(path), "per_theorem_s": dict(per), "instances": dict(count),
            "with_control_s": dict(sorted(grouped.items(), key=lambda kv: -kv[1])),
            "total_s": float(sum(per.values()))}


#: Theorem ids the catalogue group runs (empty: the whole catalogue; tests narrow it to keep them short).
CATALOGUE_IDS: tuple[str, ...] = ()


def bench_catalogue(b: Bench) -> None:
    """The quick profile of the whole catalogue in a fresh process (``attnsvm check --profile quick``, default
    ``--workers``): its wall time against QUICK_PROFILE_GOAL_S, and the instance time per theorem."""
    _profile_run(b, "catalogue", "quick", QUICK_PROFILE_GOAL_S)


def bench_profiles(b: Bench) -> None:
    """Opt-in group ``profiles`` (``--only profiles``, ~6 min): the full and paper profiles of the whole
    catalogue, each in a fresh process like ``catalogue``, against FULL_PROFILE_GOAL_S and
    PAPER_PROFILE_GOAL_S."""
    _profile_run(b, "full-profile", "full", FULL_PROFILE_GOAL_S)
    _profile_run(b, "paper-profile", "paper", PAPER_PROFILE_GOAL_S)


def _profile_run(b: Bench, key: str, profile: str, goal_s: float) -> None:
    """``attnsvm check --profile PROFILE`` (whole catalogue, or CATALOGUE_IDS) in a fresh process: wall time,
    process-tree CPU time and the instance time per theorem, recorded under ``key``."""
    run_dir = b.out / f"{key}-run"
    cmd = [sys.executable, "-m", "checks", "check", *CATALOGUE_IDS, "--profile", profile,
           "--out", str(run_dir), "--no-progress"]
    if b.device != "cpu":
        cmd += ["--device", b.device]
    _log(f"{key}: running {' '.join(cmd[1:])}")
    before = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=_child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    wall = time.perf_counter() - t0
    cpu = _children_cpu() - before
    if proc.returncode not in (0, 1):
        raise InvalidInputError(
            f"the {profile}-profile run failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
        )
    out = _catalogue_from(run_dir / "results.jsonl")
    out["wall_s"] = wall
    out["cpu_s"] = cpu
    out["exit_code"] = proc.returncode
    out["profile"] = profile
    out["load_average"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    from ..plan import default_workers

    out["workers"] = default_workers()
    b.results[key] = out
    for tid, s_ in out["with_control_s"].items():
        b.record(key, tid, "seconds_with_control", s_)
    b.record(key, "total", "seconds", out["total_s"])
    b.record(key, "total", "wall_s", wall)
    b.record(key, "total", "cpu_s", out["cpu_s"])
    top = list(out["with_control_s"].items())[:3]
    b.rows.append(Row(key, f"{profile} profile: {len(out['with_control_s'])} theorems (+controls), "
                           f"{out['workers']} workers, fresh process",
                      f"wall {_fmt_s(wall)}", "-", "-", f"<= {goal_s:.0f} s wall",
                      f"CPU {_fmt_s(out['cpu_s'])}, instance time {_fmt_s(out['total_s'])}; exit "
                      f"{proc.returncode}; top: " + ", ".join(f"{t} {s_:.1f}s" for t, s_ in top),
                      wall <= goal_s))


def _child_env() -> dict[str, str]:
    return dict(
        os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg"
    )


def _wall_min(cmd: list[str], repeats: int) -> float:
    """Minimum wall time of ``cmd`` in a fresh process over ``repeats`` runs (exit status 0 required)."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=_child_env(), capture_output=True, text=True, check=False)
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            raise InvalidInputError(
                f"bench: {' '.join(cmd[1:])} failed (exit {proc.returncode}): {proc.stderr[-500:]}"
            )
        best = min(best, dt)
    return best


def _children_cpu() -> float:
    """CPU time (user + sys) of this process's finished children so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _child_cpu(code: str) -> tuple[float, str]:
    """CPU time (user + sys) of a fresh ``python -c code`` process, start-up and imports included."""
    before = _children_cpu()
    proc = subprocess.run(
        [sys.executable, "-c", code], env=_child_env(), capture_output=True, text=True, check=False
    )
    cpu = _children_cpu() - before
    if proc.returncode != 0:
        raise InvalidInputError(f"bench: fresh-process run failed: {proc.stderr[-500:]}")
    return cpu, proc.stdout


def bench_startup(b: Bench) -> None:
    """Start-up of the command line (``--help``, ``list`` with the metadata cached) and GD in a fresh process
    (interpreter start, imports, kernel cache load and the run) against the naive loop: issue 17's goals."""
    from numerics import kernels
    from numerics.gd import warm_kernels

    exe = [sys.executable, "-m", "checks"]
    out: dict[str, Any] = {}
    reps = 3 if b.sizes is FULL else 2
    subprocess.run(
        [*exe, "list"], env=_child_env(), capture_output=True, check=False
    )  # fill the metadata cache
    for name, args in (("help", ["--help"]), ("list", ["list"]), ("list-json", ["list", "--json"])):
        _log(f"startup: attnsvm {' '.join(args)}, best of {reps}")
        out[name] = _wall_min([*exe, *args], reps)
        b.record("startup", name, "wall_s", out[name])
        b.rows.append(
            Row(
                "startup",
                f"attnsvm {' '.join(args)} (fresh process, wall)",
                _fmt_s(out[name]),
                "-",
                "-",
                f"<= {STARTUP_GOAL_S} s",
                "catalogue metadata cached (attnsvm warmup / an earlier list)",
                out[name] <= STARTUP_GOAL_S,
            )
        )
    if b.device == "cpu" and kernels.available():
        sz = b.sizes
        n, T, d = sz.gd_shape
        R, steps = sz.gd_instances, sz.gd_steps
        warm_kernels([(n, T, d, d)], params=("W",))  # the disk cache the fresh process loads
        code = ("import time\nfrom checks.bench import _gd_data, _gd_init, GD_LR\n"
                "from numerics.gd import GDConfig, run_gd\n"
                f"ds = _gd_data({sz.gd_shape!r}, {R}, seed=1); init = _gd_init('W', {R}, {d}, seed=2)\n"
                "t1 = time.process_time()\n"
                f"res = run_gd(ds, GDConfig(steps={steps}, lr=GD_LR['W']), init=init)\n"
                "t2 = time.process_time()\n"
                f"run_gd(ds, GDConfig(steps={steps}, lr=GD_LR['W']), init=init)\n"
                "print(res.backend, t1, t2 - t1, time.process_time() - t2)\n")
        _log(
            f"startup: GD W in a fresh process ({R} instances x {steps} steps, imports and cache load "
            "included)"
        )
        cpu_all, text = _child_cpu(code)
        backend, t_imports, t_first, t_second = text.split()[:4]
        t_imports, t_first, t_second = float(t_imports), float(t_first), float(t_second)
        cpu = (
            cpu_all - t_second
        )  # the process without the second (steady-state) run, which is only a reference
        gd = b.results.get("gd", {}).get("W")
        if gd:
            per_naive = gd["naive_per_instance_s"]
        else:
            from numerics.gd import run_gd  # noqa: F401 - the naive loop below needs torch loaded anyway

            dt = _gd_data(sz.gd_shape, 1, seed=1)[0]
            ini = _gd_init("W", 1, d, seed=2)[0]
            per_naive, _ = _timeit(lambda: naive_gd(dt.X, dt.Y, dt.Z, dt.v, ini, param="W", steps=steps,
                                                    lr=GD_LR["W"]))
        t_naive = per_naive * R
        ratio = t_naive / cpu
        out["gd_fresh"] = {
            "cpu_s": cpu,
            "imports_s": t_imports,
            "first_run_s": t_first,
            "steady_run_s": t_second,
            "backend": backend,
            "naive_per_instance_s": per_naive,
            "ratio": ratio,
            "ratio_first_call": t_naive / t_first,
            "ratio_steady": t_naive / t_second,
        }
        b.record("startup", "gd-fresh", "ratio", ratio)
        b.record("startup", "gd-fresh", "ratio_first_call", t_naive / t_first)
        b.rows.append(
            Row(
                "startup",
                f"GD W in a fresh process: {R} inst x {steps} steps (n{n} T{T} d{d}), {backend}",
                _fmt_s(cpu),
                f"{_fmt_s(t_naive)} (extrap.)",
                f"{ratio:.0f}x",
                f">= {GD_FRESH_TARGET:.0f}x",
                f"process CPU time: interpreter + imports (numpy, torch) {_fmt_s(t_imports)}, first run_gd "
                f"(numba import, kernel cache load, run) {_fmt_s(t_first)} = {t_naive / t_first:.0f}x; "
                f"the same run again {_fmt_s(t_second)} = {t_naive / t_second:.0f}x",
                ratio >= GD_FRESH_TARGET,
            )
        )
    b.results["startup"] = out
