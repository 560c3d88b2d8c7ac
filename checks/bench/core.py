"""The bench suite's shared pieces: targets (each with its reason), sizes, rows, timing helpers, FLOP
counts and the naive per-instance GD baseline."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

GROUPS = ("gd", "svm", "gd-curve", "svm-curve", "ntp", "md", "catalogue", "startup")
#: Groups that run only when named with ``--only`` (the full and paper profiles take ~6 minutes).
OPT_IN_GROUPS = ("profiles",)

# -- targets and tolerances (each with its reason) -------------------------------------------------

#: The "Performance" issue's targets: batched GD vs the per-instance autograd loop, certified
#: Frobenius solve vs the per-pair cvxpy loop, nuclear solve at most 2x the naive default-accuracy solve.
GD_TARGET = 200.0
SVM_FRO_TARGET = 20.0
SVM_NUC_MAX_SLOWDOWN = 2.0
#: Issue 17's goals (end-to-end speed), each checked by the bench (met / not met; never asserted in tests):
#: the certified nuclear solve at least this many times faster than the naive default-accuracy solve, at
#: the svm shape and at SVM_NUC_LARGE;
SVM_NUC_TARGET = 5.0
SVM_NUC_LARGE = (20, 20, 40)
#: `attnsvm list` and `attnsvm --help` wall time (fresh process, catalogue metadata cached);
STARTUP_GOAL_S = 0.5
#: the quick profile's wall time for the whole catalogue (fresh process, default --workers); the full and
#: paper profiles' (group ``profiles``, opt-in);
QUICK_PROFILE_GOAL_S = 25.0
FULL_PROFILE_GOAL_S = 90.0
PAPER_PROFILE_GOAL_S = 240.0
#: GD in a fresh process, including interpreter start, imports and loading the compiled kernels from the
#: disk cache, against the naive loop (same instances, steps, per-instance naive time of this run).
GD_FRESH_TARGET = 150.0

#: Issue 25: GD for the next-token-prediction family, batched (one run_gd call over many instances of one
#: shape), at least this many times the naive per-instance autograd loop, measured in the same run.
NTP_TARGET = 100.0
#: Ours and naive run the same plain NTP GD from W = 0 (a smooth descent at η = 1/L: rounding differences do
#: not grow chaotically; measured ~5e-15 relative after 2000 steps): 1e-9 says "the same iterates".
NTP_W_RTOL = 1e-9
#: Issue 25 counts l_p mirror descent (Julistiono et al. 2024) among the new families: the same target.
MD_TARGET = NTP_TARGET
#: Plain mirror descent: ours and naive run the same iteration from the same small start, a short smooth
#: descent (2000 steps at the md checks' η = 0.4, ||W|| <= ~10, the softmax far from saturating float64)
#: whose steps shrink with the gradient: rounding differences do not grow (measured <= 1e-13 relative at p = 3
#: and 1.75): 1e-9 says "the same iterates".
MD_W_RTOL = 1e-9
#: Normalised mirror descent moves the dual variable u by a fixed η per step, and for p > 2 the inverse map
#: W = sign(u)|u|^(1/(p-1)) has an unbounded derivative where an entry of u passes 0: rounding differences
#: grow there by orders of magnitude and settle again (bench instance 4, p = 3: W_22 passes 0 at step ~1300,
#: the relative difference goes 1e-14 -> 3e-4 -> 2e-8, the same between our fused and explicit loops as
#: against naive). So the normalised row is judged as the gd group's normalised GD (same reason: rounding
#: amplified by the iteration, not a difference of the codes): same final direction, corr >= GD_CORR_MIN.

#: Ours and naive run the same normalised GD from the same init; up to rounding their iterates agree.
#: 0.98 is the issue's threshold for "same final direction".
GD_CORR_MIN = 0.98

#: Step sizes of the agreement/timing run. 2000 steps of 0.02 (W) keep ||W||_F <= 40, where the softmax is not
#: yet saturated to round-off: the float64 gradient direction is still accurate in both codes, so their
#: iterates agree to ~1e-10. At lr = 0.1 both reach ||W|| ~ 130, the computed gradient direction becomes
#: round-off (cancellation in s_t (gamma_t - s^T gamma)) and the two trajectories separate chaotically (W:
#: corr 0.975-0.99 at step 2000; (K, Q) at lr 0.02: corr down to 0.88) — a property of the problem, not a bug
#: of either code. The time per step does not depend on lr.
GD_LR = {"W": 0.02, "KQ": 0.005}
#: (For (K, Q) ||W|| = ||K Q^T|| grows quadratically in the steps: lr 0.005 keeps ||W|| <= ~80.)

#: Same optimal value, Frobenius: the naive default (Clarabel, default tolerances) solve reaches ~1e-9
#: relative; 1e-6 is the issue's requirement.
SVM_FRO_OBJ_RTOL = 1e-6
#: Nuclear: the naive default-accuracy SDP answer is only good to ~1e-5 relative (observed); 1e-4
#: says "same optimum" without asking the baseline for an accuracy it does not have.
SVM_NUC_OBJ_RTOL = 1e-4
#: The authors' rank rule: number of singular values above this absolute threshold.
NAIVE_RANK_ABS = 1e-7


@dataclass(frozen=True)
class BenchSizes:
    """Problem sizes of one bench mode (full or --quick)."""

    gd_shape: tuple[int, int, int] = (6, 8, 10)  # (n, T, d)
    gd_instances: int = 100
    gd_steps: int = 2000
    gd_naive_subset: int = 5
    gd_repeats: int = 3  # ours: min over repeats
    gd_naive_repeats: int = 2  # naive: min over repeats, per instance
    profile_steps: int = 300
    svm_shape: tuple[int, int, int] = (10, 10, 20)
    svm_instances: int = 8
    svm_repeats: int = 3  # ours Frobenius: min over repeats (a few ms each)
    curve_R: tuple[int, ...] = (1, 3, 10, 30, 100, 300, 1000, 3000, 10000)
    curve_steps: int = 200
    svm_curve: tuple[tuple[int, int, int], ...] = ((4, 4, 8), (6, 6, 12), (10, 10, 20), (14, 14, 28),
                                                   (20, 20, 40))
    svm_curve_instances: int = 2
    svm_curve_naive_max_rows: int = 400  # naive per-pair loop only up to this many constraints
    peak_gemm: int = 1024
    ntp_shape: tuple[int, int, int, int] = (8, 4, 5, 8)  # (n, T, K, d) of numerics.ntp.random_ntp
    ntp_instances: int = 100
    ntp_steps: int = 2000
    ntp_naive_subset: int = 5
    ntp_linear_shape: tuple[int, int, int] = (4, 8, 6)  # (m, d, V) of numerics.ntp_linear.random_linear_ntp
    md_shape: tuple[int, int, int] = (4, 6, 8)  # (n, T, d): the md checks' B.2 instances (strategies.b2_data)
    md_instances: int = 100
    md_steps: int = 2000
    md_naive_subset: int = 5


FULL = BenchSizes()
QUICK = BenchSizes(
    gd_shape=(3, 4, 5), gd_instances=8, gd_steps=50, gd_naive_subset=2, gd_repeats=1, gd_naive_repeats=1,
    profile_steps=20, svm_shape=(4, 4, 6), svm_instances=1, svm_repeats=1, curve_R=(1, 4, 16), curve_steps=20,
    svm_curve=((3, 3, 4), (4, 4, 6)), svm_curve_instances=1, svm_curve_naive_max_rows=40, peak_gemm=128,
    ntp_shape=(6, 3, 5, 8), ntp_instances=4, ntp_steps=20, ntp_naive_subset=1,
    md_shape=(3, 4, 5), md_instances=4, md_steps=20, md_naive_subset=1,
)


@dataclass
class Row:
    """One line of the printed table."""

    group: str
    name: str
    ours: str
    naive: str
    ratio: str
    target: str
    check: str
    ok: bool | None = None


@dataclass
class Bench:
    sizes: BenchSizes
    device: str
    out: Path
    rows: list[Row] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    flat: list[tuple[str, str, str, float | int | str]] = field(default_factory=list)

    def record(self, group: str, name: str, metric: str, value: Any) -> None:
        self.flat.append((group, name, metric, value))


# -- helpers ------------------------------------------------------------------------------------------

def _log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


#: Clock of every timing: CPU time of this (single-threaded) process on CPU — the work done, robust to
#: other processes loading the machine — and wall clock on CUDA (GPU work is not CPU time). Set by
#: :func:`run_bench`.
_CLOCK: dict[str, Any] = {"name": "process CPU time", "fn": time.process_time}


def _timeit(fn: Callable[[], Any], repeats: int = 1) -> tuple[float, Any]:
    """(min seconds over ``repeats`` calls on the bench clock, last result)."""
    clock = _CLOCK["fn"]
    best, res = math.inf, None
    for _ in range(max(1, repeats)):
        t0 = clock()
        res = fn()
        best = min(best, clock() - t0)
    return best, res


def _fmt_s(s: float) -> str:
    if not math.isfinite(s):
        return "-"
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.1f} us"


def _fmt_flops(f: float) -> str:
    for unit, scale in (("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if f >= scale:
            return f"{f / scale:.2f} {unit}"
    return f"{f:.0f} FLOP/s"


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(np.sum(a * b) / (na * nb)) if na > 0 and nb > 0 else float("nan")


@contextlib.contextmanager
def _one_thread():
    """torch.set_num_threads(1) and one-thread BLAS pools for everything inside (both sides)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
            yield
        else:
            with threadpool_limits(limits=1):
                yield
    finally:
        torch.set_num_threads(old)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def machine(device: str) -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info = {"cpu": cpu, "cores": os.cpu_count(), "threads_used": 1, "torch": torch.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "device": device,
            "platform": platform.platform()}
    with contextlib.suppress(Exception):
        import cvxpy

        info["cvxpy"] = cvxpy.__version__
    with contextlib.suppress(OSError, AttributeError):
        info["loadavg_at_start"] = round(os.getloadavg()[0], 2)
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


# -- FLOP counts --------------------------------------------------------------------------------------

def gd_step_flops(n: int, T: int, d: int, param: str, m: int | None = None) -> int:
    """Floating-point operations of one normalised GD step of one instance (closed-form gradient).

    Shared gradient G = (1/n) sum_i (X_i^T c_i) z_i^T:
      W z_i (2nd^2), logits X_i (W z_i) (2nTd), softmax (4nT: shift, exp, sum, divide),
      token weights c_i = l'_i s_i (gamma_i - s_i^T gamma_i) (5nT + 4n), X_i^T c_i (2nTd),
      sum_i (X_i^T c_i) z_i^T (2nd^2).
    "W": + ||G||_F and the step (4d^2). "KQ" (m = d by default): + W = K Q^T (2d^2 m),
      grad_K = G Q and grad_Q = G^T K (4d^2 m), two norms and two steps (8dm).
    """
    grad = 4 * n * d * d + 4 * n * T * d + 9 * n * T + 4 * n
    if param == "W":
        return grad + 4 * d * d
    m = d if m is None else m
    return grad + 6 * d * d * m + 8 * d * m


# -- the naive GD baseline --------------------------------------------------------------------------

def naive_gd(X: np.ndarray, Y: np.ndarray, Z: np.ndarray, v: np.ndarray, init: Any, *, param: str,
             steps: int, lr: float, mirror_p: float | None = None, normalized: bool = True) -> np.ndarray:
    """One instance, torch autograd, a plain Python loop: the research-code way.

    L(W) = mean_i log(1 + exp(-Y_i v^T X_i^T softmax(X_i W z_i))); each parameter moves by
    lr * grad / ||grad||_F (for (K, Q) each with its own norm). With ``mirror_p`` = p (W only) the step is
    l_p mirror descent written out by hand: u = sign(W)|W|^(p-1), u <- u - lr g (``normalized``: g / ||g||_q,
    q = p/(p-1)), W = sign(u)|u|^(1/(p-1)). Returns the final W (d, d).
    """
    import torch

    X, Y, Z, v = (torch.tensor(np.array(a, dtype=np.float64)) for a in (X, Y, Z, v))  # own, writable copies
    if param == "W":
        params = [torch.tensor(np.asarray(init), dtype=torch.float64, requires_grad=True)]
    else:
        params = [torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=True) for a in init]
    for _ in range(steps):
        W = params[0] if param == "W" else params[0] @ params[1].T
        logits = (X @ (W @ Z.unsqueeze(-1))).squeeze(-1)  # (n, T)
        s = torch.softmax(logits, dim=-1)
        f = (s.unsqueeze(-1) * X).sum(1) @ v  # (n,)
        loss = torch.nn.functional.softplus(-Y * f).mean()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                if mirror_p is None:
                    p.sub_(lr * g / g.norm())
                    continue
                if normalized:
                    q = mirror_p / (mirror_p - 1.0)
                    g = g / g.abs().pow(q).sum().pow(1.0 / q)
                u = torch.sign(p) * p.abs().pow(mirror_p - 1.0) - lr * g
                p.copy_(torch.sign(u) * u.abs().pow(1.0 / (mirror_p - 1.0)))
    with torch.no_grad():
        W = params[0] if param == "W" else params[0] @ params[1].T
        return W.numpy().copy()


# -- groups ------------------------------------------------------------------------------------------
