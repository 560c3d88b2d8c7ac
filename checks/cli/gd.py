"""``attnsvm gd FILE.npz``: one gradient-descent run on one dataset, the twin of ``attnsvm svm``.

Runs :func:`numerics.gd.run_gd` itself (the engine and iterates of the catalogue's batched runs) on the
dataset, then reports the final loss and ‖W‖, the token each example selects (arg max of its softmax) and
whether it is the optimal one, the attention SVM of the selected tokens (Frobenius for W, nuclear for
(K, Q)), solved and certified as ``attnsvm svm`` does (checks.cli.svm.solve_certified), corr(W, W^mm_α),
and the step fidelity: one engine step from the initial and from the final iterate against the step along
an independently computed gradient (torch autograd of the loss written out here, not numerics.attention).

Bad input raises InvalidInputError (one line on stderr, exit 2 in checks.cli) before any GD step; an SVM
whose solve fails or does not certify is reported as such and exits 1 (as ``attnsvm svm``); Ctrl-C writes
the records made so far (``--out``, ``--json``) and exits 130. The JSON schema is in docs/architecture.md
("attnsvm gd --json").
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from checks.cli.svm import load_data, solution_dict, solve_certified
from numerics.data import AttentionData
from numerics.errors import InvalidInputError
from numerics.fileio import atomic_open, write_text
from numerics.gd import GDConfig, RandomInit, run_gd
from numerics.gd_common import GD_RECORDS_ATTR, _normal
from numerics.losses import check_loss
from numerics.svm import SVMSolution
from numerics.tokens import corr, optimal_tokens, scores, softmax_probs

#: Largest change of a logit gap (x_it − x_iτ)ᵀ W z_i one plain step may make: e^-700 ≈ 1e-304 is at
#: float64's underflow (smallest normal 2.2e-308), so a step that can move a gap further can jump a softmax
#: from anywhere to an exact one-hot in one step; such an lr is refused for ``--plain`` (see
#: :func:`plain_step_gap_bound`).
LOGIT_GAP_MAX = 700.0

#: The engine's step and the independent step are float64 evaluations of the same step: they differ by
#: rounding (~1e-13 relative at most here: W⁺ − W cancels eps ‖W‖ against a step of length lr), while a
#: wrong softmax, gradient or normalisation changes the step at O(1) from a small start. Above this
#: relative difference the fidelity line says DIFFER.
STEP_RTOL = 1e-6

#: A gradient whose largest entry is below this (2^52 times float64's smallest normal, ~1e-292) is made of
#: softmax tails at float64's underflow (e^-670 and beyond, partly flushed to subnormals or 0): neither the
#: engine's step nor the independent one is determined at working precision there, and the step check says
#: n/a instead of comparing them.
GRAD_UNDERFLOW = float(np.finfo(np.float64).tiny) * 2.0 ** 52

#: Records when --record-every is not given: about this many along the run.
DEFAULT_RECORDS = 100


# -- argument checks (all before any GD step) -------------------------------------------------------

def _check_args(args: Any) -> None:
    check_loss(args.loss)
    if args.steps < 1:
        raise InvalidInputError(f"--steps must be a positive integer, got {args.steps}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise InvalidInputError(f"--lr must be a finite number > 0, got {args.lr}")
    if args.record_every is not None and args.record_every < 1:
        raise InvalidInputError(f"--record-every must be a positive integer, got {args.record_every}")
    if not (math.isfinite(args.init_scale) and args.init_scale >= 0):
        raise InvalidInputError(f"--init-scale must be a finite number >= 0, got {args.init_scale}")
    if args.m is not None:
        if args.param != "KQ":
            raise InvalidInputError("--m is the width of (K, Q): it needs --param KQ")
        if args.m < 1:
            raise InvalidInputError(f"--m must be a positive integer, got {args.m}")
    if args.init is not None and args.seed is not None:
        raise InvalidInputError("--seed draws the random start; it cannot be combined with --init")
    if args.backend == "numba" and (args.device != "cpu" or not args.normalized):
        raise InvalidInputError("--backend numba runs normalised GD on the CPU only "
                                "(use --backend torch or auto)")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InvalidInputError("--device cuda requested but no CUDA GPU is available; use --device cpu")


def _read_npz(p: Path, where: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file, never unpickled; one-line InvalidInputError otherwise."""
    if not p.exists():
        raise InvalidInputError(f"{where}: no such file")
    if p.is_dir():
        raise InvalidInputError(f"{where}: is a directory, expected an .npz file")
    try:
        loaded = np.load(p, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise InvalidInputError(f"{where}: not an .npz archive (got a single .npy array)")
        with loaded as npz:
            arrays = {k: npz[k] for k in npz.files}
    except InvalidInputError:
        raise
    except ValueError as exc:
        if "Object arrays" in str(exc):
            raise InvalidInputError(f"{where}: contains object (pickled) arrays, never loaded") from None
        raise InvalidInputError(f"{where}: not a readable .npz file ({exc})") from None
    except Exception as exc:  # OSError, BadZipFile, EOFError, numpy's errors on corrupt members
        raise InvalidInputError(f"{where}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
    return arrays


def _load_init(path: str, param: str, d: int, m: int | None) -> tuple[np.ndarray, ...]:
    """--init: W (d, d), or K, Q (d, m) of equal shape, from an .npz (never unpickled); one-line errors."""
    where = f"--init {path}"
    arrays = _read_npz(Path(path), where)
    want = ["W"] if param == "W" else ["K", "Q"]
    if sorted(arrays) != want:
        raise InvalidInputError(f"{where}: --param {param} needs exactly the key(s) {want}, "
                                f"got {sorted(arrays)}")
    out = []
    for key in want:
        a = arrays[key]
        if a.dtype.kind not in "fiu" or a.dtype.itemsize > 8:
            raise InvalidInputError(f"{where}: {key} must be a real float64 array, got dtype {a.dtype}")
        a = a.astype(np.float64)
        if not np.isfinite(a).all():
            raise InvalidInputError(f"{where}: {key} contains NaN or Inf")
        out.append(a)
    if param == "W":
        if out[0].shape != (d, d):
            raise InvalidInputError(f"{where}: W must have shape (d, d) = {(d, d)} for this dataset, "
                                    f"got {out[0].shape}")
        return (out[0],)
    K, Q = out
    width = K.shape[1] if K.ndim == 2 else None
    if K.ndim != 2 or K.shape[0] != d or Q.shape != K.shape:
        raise InvalidInputError(f"{where}: K and Q must both have shape (d, m) with d = {d}, "
                                f"got {K.shape} and {Q.shape}")
    if m is not None and width != m:
        raise InvalidInputError(f"{where}: K and Q have width m = {width}, but --m {m} was given")
    return K, Q


def _default_init(param: str, d: int, m: int, seed: int, scale: float) -> tuple[np.ndarray, ...]:
    """The start run_gd draws for one instance from ``seed`` (numerics.gd.run_gd): scale · N(0, 1) entries
    from torch's CPU generator, K from seed and Q from seed + 1."""
    if param == "W":
        return (scale * _normal((d, d), 1, seed)[0].numpy(),)
    return scale * _normal((d, m), 1, seed)[0].numpy(), scale * _normal((d, m), 1, seed + 1)[0].numpy()


def plain_step_gap_bound(data: AttentionData, loss: str, lr: float, init: tuple[np.ndarray, ...]) -> float:
    """A sound upper bound on how far one plain GD step (W ← W − lr ∇L(W)) moves any logit gap.

    ‖∇L(W)‖_F ≤ B for every W, with B = (1/n) Σ_i |ℓ′|_max · max_t ‖x_it‖ · (range_t γ_it)/2 · ‖z_i‖:
    ∇L = (1/n) Σ_i ℓ′_i X_iᵀ c_i z_iᵀ with c_it = s_it (γ_it − s_iᵀγ_i), and Σ_t |c_it| is the mean absolute
    deviation of γ_i under s_i, at most half its range; |ℓ′| ≤ 1 (logistic, linear), ≤ e^{−min_t γ_it}
    (exponential, since ℓ′ is taken at s_iᵀγ_i ≥ min_t γ_it). A gap moves by
    |(x_it − x_iτ)ᵀ ΔW z_i| ≤ 2 max_t ‖x_it‖ ‖z_i‖ ‖ΔW‖_F, and ‖ΔW‖_F ≤ lr B for W. For (K, Q)
    (ΔK = −lr ∇L Q, ΔQ = −lr ∇Lᵀ K): ‖ΔW‖_F ≤ lr B (‖K‖² + ‖Q‖²) + lr² B² ‖K‖ ‖Q‖, which grows with the
    factors, so for (K, Q) this bounds the first step (at the start) only.

    Per step, not over the run: a run-long bound (steps · lr · B) would refuse ordinary runs (lr 1 and
    10⁴ steps on unit data gives 2·10⁴), though plain GD's gradient decays like e^{−margin} and its logits
    grow like log k. What is refused is an lr with which a single step can saturate the softmax.
    """
    gamma = scores(data)  # (n, T)
    xmax = np.linalg.norm(data.X, axis=-1).max(axis=1)  # (n,)
    zn = np.linalg.norm(data.Z, axis=-1)  # (n,)
    spread = gamma.max(axis=1) - gamma.min(axis=1)
    with np.errstate(over="ignore"):
        lp = np.exp(-gamma.min(axis=1)) if loss == "exponential" else np.ones(data.n)
    B = float(np.mean(lp * xmax * spread / 2 * zn))
    if len(init) == 1:
        dW = lr * B
    else:
        nk, nq = (float(np.linalg.norm(a)) for a in init)
        dW = lr * B * (nk ** 2 + nq ** 2) + (lr * B) ** 2 * nk * nq
    return float(dW * np.max(2 * xmax * zn))


# -- the independent step --------------------------------------------------------------------------

def autograd_grads(data: AttentionData, params: tuple[np.ndarray, ...], loss: str) -> list[np.ndarray]:
    """∇L at W (one param) or at (K, Q) by torch autograd of the loss written out here (not with
    numerics.attention): L = (1/n) Σ_i ℓ(u_i), u_i = s_iᵀγ_i, s_i = softmax(X_i W z_i), γ_it = Y_i vᵀx_it.

    u_i is written centred on the most-attended token r_i (a constant index): u_i = γ_ir + Σ_t s_it (γ_it −
    γ_ir), the same value, whose derivative autograd then forms without the cancellation that s_rγ_r −
    s_r sᵀγ suffers once the softmax saturates. Logistic ℓ(u) = log(1 + e^{−u}) as logaddexp(0, −u)."""
    import torch

    X, Z = torch.tensor(data.X), torch.tensor(data.Z)
    gamma = torch.tensor(scores(data))
    leaves = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    W = leaves[0] if len(leaves) == 1 else leaves[0] @ leaves[1].T
    lg = torch.einsum("itd,de,ie->it", X, W, Z)
    r = lg.detach().argmax(dim=1, keepdim=True)
    s = torch.softmax(lg, dim=1)
    g_r = gamma.gather(1, r)
    u = g_r[:, 0] + (s * (gamma - g_r)).sum(dim=1)
    ell = {"logistic": lambda t: torch.logaddexp(torch.zeros_like(t), -t),
           "exponential": lambda t: torch.exp(-t), "linear": lambda t: -t}[loss]
    ell(u).mean().backward()
    return [leaf.grad.numpy() for leaf in leaves]


def _unit(g: np.ndarray) -> np.ndarray:
    """g / ‖g‖_F without underflow (scaled by max |g| first); 0 for g = 0."""
    top = float(np.max(np.abs(g))) if g.size else 0.0
    if top == 0:
        return np.zeros_like(g)
    h = g / top
    return h / np.linalg.norm(h)


def step_fidelity(data: AttentionData, params: tuple[np.ndarray, ...], args: Any, backend: str
                  ) -> dict[str, float | None]:
    """One step from ``params``: Δ_engine from run_gd (steps=1, the same options and code path) against
    Δ_indep = −lr ∇/‖∇‖ per factor (normalised) or −lr ∇ (plain), ∇ from :func:`autograd_grads`.

    Returns rel_diff = ‖Δ_engine − Δ_indep‖ / ‖Δ_indep‖ (None when Δ_indep = 0: the gradient vanished in
    float64, e.g. every softmax saturated to an exact one-hot, and there is nothing to compare),
    direction_diff = 1 − corr(Δ_engine, Δ_indep) (None when either is 0) and both step norms (Δ as one
    vector (ΔK, ΔQ) for (K, Q)). Normalised W-GD shortens its step below lr where ‖∇L‖² falls under the
    engine's rounding floor (numerics.gd_common.NORM_FLOOR_FACTOR: softmax tails near float64's underflow,
    logit gaps ≳ 700): there the direction is what can be compared, and rel_diff is not small."""
    cfg = GDConfig(steps=1, lr=args.lr, geometry="normalized" if args.normalized else "plain", loss=args.loss,
                   param=args.param, m=params[0].shape[1] if args.param == "KQ" else None, backend=backend)
    if args.param == "W":
        res = run_gd([data], cfg, init=params[0][None], device=args.device)
        got = [res.W[0] - params[0]]
    else:
        res = run_gd([data], cfg, init=(params[0][None], params[1][None]), device=args.device)
        got = [res.K[0] - params[0], res.Q[0] - params[1]]
    grads = autograd_grads(data, params, args.loss)
    want = [-args.lr * (_unit(g) if args.normalized else g) for g in grads]
    a = np.concatenate([g.ravel() for g in got])
    b = np.concatenate([w.ravel() for w in want])
    den, na = float(np.linalg.norm(b)), float(np.linalg.norm(a))
    return {"rel_diff": float(np.linalg.norm(a - b)) / den if den > 0 else None,
            "direction_diff": 1.0 - float(np.sum(_unit(a) * _unit(b))) if den > 0 and na > 0 else None,
            "step_norm": den, "engine_step_norm": na,
            "grad_max": max(float(np.max(np.abs(g))) for g in grads)}


# -- records ----------------------------------------------------------------------------------------

def _records(data: AttentionData, its, Ws, Ls, W_svm: np.ndarray | None) -> dict[str, list]:
    Ws = [np.asarray(w).reshape(data.d, data.d) for w in Ws]
    return {
        "iteration": [int(k) for k in its],
        "loss": [float(np.asarray(v).reshape(-1)[0]) for v in Ls],
        "W_norm": [float(np.linalg.norm(w)) for w in Ws],
        "corr": [_num(corr(w, W_svm)) if W_svm is not None else None for w in Ws],
        "max_prob": [softmax_probs(data, w).max(axis=1).tolist() for w in Ws],
    }


def _num(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _write_out(out: Path, rec: dict[str, list], doc: dict[str, Any]) -> list[Path]:
    """trajectory.csv, trajectory.png (corr, loss, ‖W‖ against the iteration) and gd.json, each atomic."""
    out.mkdir(parents=True, exist_ok=True)
    n = len(rec["max_prob"][0]) if rec["max_prob"] else 0
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["iteration", "loss", "W_norm", "corr", *[f"max_prob_{i}" for i in range(n)]])
    for j, k in enumerate(rec["iteration"]):
        c = rec["corr"][j]
        w.writerow([k, repr(rec["loss"][j]), repr(rec["W_norm"][j]), "" if c is None else repr(c),
                    *[repr(p) for p in rec["max_prob"][j]]])
    paths = [out / "trajectory.csv", out / "trajectory.png", out / "gd.json"]
    write_text(paths[0], buf.getvalue())
    _figure(rec, paths[1])
    write_text(paths[2], json.dumps(doc, indent=1) + "\n")
    return paths


def _figure(rec: dict[str, list], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    its = rec["iteration"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    cs = [np.nan if c is None else c for c in rec["corr"]]
    axes[0].plot(its, cs, label="corr(W, W^mm_α)")
    axes[0].axhline(1.0, color="k", ls="--", lw=0.8, label="corr = 1")
    axes[0].set_title("corr(W/‖W‖, W^mm/‖W^mm‖)")
    axes[0].legend(loc="lower right", fontsize=8)
    axes[1].plot(its, rec["loss"])
    axes[1].set_title("loss")
    if all(v > 0 for v in rec["loss"]):
        axes[1].set_yscale("log")
    axes[2].plot(its, rec["W_norm"])
    axes[2].set_title("‖W‖_F")
    for ax in axes:
        ax.set_xlabel("iteration")
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=100)
    plt.close(fig)


# -- the command ------------------------------------------------------------------------------------

def _interrupted(exc: KeyboardInterrupt, data: AttentionData, args: Any, head: dict[str, Any]) -> int:
    its, Ws, Ls = getattr(exc, GD_RECORDS_ATTR, ([], [], []))
    rec = _records(data, its, [w[0] for w in Ws], [v[0] for v in Ls], None)
    doc = {**head, "interrupted": True, "records": rec}
    where = ""
    if args.out and rec["iteration"]:
        _write_out(Path(args.out), rec, doc)
        where = f"; wrote them to {args.out}"
    if args.json:
        print(json.dumps(doc))
    last = rec["iteration"][-1] if rec["iteration"] else None
    print(f"attnsvm gd: interrupted ({len(its)} records, the last at iteration {last}){where}",
          file=sys.stderr)
    return 130


def cmd_gd(args: Any) -> int:
    _check_args(args)
    data = load_data(args.file)
    if data.v is None:
        raise InvalidInputError(f"{args.file}: GD needs the linear head: the dataset has no key 'v' "
                                "(shape (d,))")
    d = data.d
    if args.init is not None:
        init = _load_init(args.init, args.param, d, args.m)
    else:
        init = _default_init(args.param, d, d if args.m is None else args.m,
                             0 if args.seed is None else args.seed, args.init_scale)
    m = init[0].shape[1] if args.param == "KQ" else None
    if not args.normalized:
        gap = plain_step_gap_bound(data, args.loss, args.lr, init)
        if not gap <= LOGIT_GAP_MAX:
            first = " (from the start; the bound grows with K and Q)" if args.param == "KQ" else ""
            raise InvalidInputError(
                f"--plain with --lr {args.lr:g}: one step can move a logit gap by up to {gap:.3g} > "
                f"{LOGIT_GAP_MAX:g}{first}, enough to saturate a softmax to an exact one-hot in one step "
                "(e^-700 is float64's underflow); use a smaller --lr or --normalized")
    record_every = args.record_every or max(1, args.steps // DEFAULT_RECORDS)
    head = {
        "file": str(args.file), "n": data.n, "T": data.T, "d": d, "param": args.param, "m": m,
        "normalized": args.normalized, "loss": args.loss, "steps": args.steps, "lr": args.lr,
        "device": args.device, "init": args.init, "seed": None if args.init else (args.seed or 0),
        "init_scale": None if args.init else args.init_scale, "record_every": record_every,
    }
    kind = "normalised" if args.normalized else "plain"
    print(f"attnsvm gd: {args.steps} steps of {kind} GD on {'W' if m is None else f'(K, Q), m = {m}'}, "
          f"lr {args.lr:g}, {args.loss} loss, {args.device}", file=sys.stderr, flush=True)
    try:
        # without --init run_gd draws the start itself from the seed (the very call a script would make;
        # `init` above is that same start, for the fidelity step and the plain-lr bound)
        given = None if args.init is None else tuple(a[None] for a in init) if m else init[0][None]
        cfg = GDConfig(steps=args.steps, lr=args.lr, geometry="normalized" if args.normalized else "plain",
                       loss=args.loss, param=args.param, m=m, backend=args.backend,
                       progress=sys.stderr.isatty())
        start = RandomInit(head["seed"] or 0, args.init_scale) if given is None else given
        res = run_gd([data], cfg, init=start, device=args.device, record_every=record_every)
    except KeyboardInterrupt as exc:
        return _interrupted(exc, data, args, head)
    return _report(data, args, head, init, res)


def _report(data: AttentionData, args: Any, head: dict[str, Any], init: tuple[np.ndarray, ...], res) -> int:
    W = res.W[0]
    probs = softmax_probs(data, W)
    selected = probs.argmax(axis=1)
    opt = optimal_tokens(data)
    norm = "fro" if args.param == "W" else "nuc"
    sol, failure = solve_certified(data, selected, norm, m=head["m"])
    W_svm = sol.W if sol is not None and sol.feasible else None
    c = _num(corr(W, W_svm)) if W_svm is not None else None
    final = [res.W[0]] if args.param == "W" else [res.K[0], res.Q[0]]
    fid = {"initial": step_fidelity(data, init, args, res.backend),
           "final": step_fidelity(data, tuple(final), args, res.backend)}
    rec = _records(data, res.iterations, res.W_traj[:, 0], res.loss_traj[:, 0], W_svm)
    doc = {
        **head, "interrupted": False, "backend": res.backend,
        "final": {"loss": float(res.loss[0]), "W_norm": float(res.norms[0]), "W": W.tolist(),
                  "K": None if res.K is None else res.K[0].tolist(),
                  "Q": None if res.Q is None else res.Q[0].tolist()},
        "initial": {"W": (init[0] if len(init) == 1 else init[0] @ init[1].T).tolist(),
                    "K": init[0].tolist() if len(init) == 2 else None,
                    "Q": init[1].tolist() if len(init) == 2 else None},
        "selected": selected.tolist(), "optimal": opt.index.tolist(), "optimal_tied": opt.tied.tolist(),
        "selected_optimal": (selected == opt.index).tolist(),
        "svm": solution_dict(sol) if sol is not None else {"status": "failed", "error": failure},
        "corr": c,
        "step_fidelity": {"method": "torch autograd", "rtol": STEP_RTOL, **fid},
        "records": rec,
    }
    if args.out:
        paths = _write_out(Path(args.out), rec, doc)
        print(f"attnsvm gd: wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    if args.json:
        print(json.dumps(doc))
    else:
        _print_text(doc, sol, failure)
    return 0 if sol is not None else 1


def _print_text(doc: dict[str, Any], sol: SVMSolution | None, failure: str | None) -> None:
    fin = doc["final"]
    what = "W" if doc["param"] == "W" else f"(K, Q), m = {doc['m']}"
    kind = "normalised" if doc["normalized"] else "plain"
    print(f"gd:          {kind} GD on {what}, {doc['steps']} steps, "
          f"lr {doc['lr']:g}, {doc['loss']} loss, backend {doc['backend']}, {doc['device']}")
    print(f"final loss:  {fin['loss']:.12g}")
    print(f"‖W‖_F:       {fin['W_norm']:.12g}")
    marks = [f"{i}:{s}" + ("" if ok else f"≠{o}" + (" (tied)" if tie else ""))
             for i, (s, o, ok, tie) in enumerate(zip(doc["selected"], doc["optimal"], doc["selected_optimal"],
                                                     doc["optimal_tied"], strict=True))]
    n_opt = sum(doc["selected_optimal"])
    print(f"selected:    {'  '.join(marks)}  ({n_opt}/{len(marks)} optimal; i:t≠opt marks the others)")
    norm = "Frobenius" if doc["param"] == "W" else "nuclear"
    if sol is None:
        print(f"svm:         {norm}, FAILED: {failure}")
    else:
        obj = f", objective {sol.objective:.12g}, rank {sol.rank}" if sol.feasible else ""
        print(f"svm:         {norm} Att-SVM of the selected tokens: status {sol.status}{obj}")
        print(f"certificate: {sol.certificate.summary()}")
        for note in sol.notes:
            print(f"note:        {note}")
    c = doc["corr"]
    print(f"corr:        {'n/a (no SVM solution)' if c is None else f'{c:.12f}'}  "
          "(corr(W/‖W‖, W^mm_α/‖W^mm_α‖), 1 − corr = " + ("n/a)" if c is None else f"{1 - c:.3g})"))
    fid = doc["step_fidelity"]
    parts = [_fidelity_text(k, fid[k], doc["normalized"]) for k in ("initial", "final")]
    print(f"step:        engine vs autograd, relative difference: {', '.join(parts)}")


def _fidelity_text(which: str, f: dict[str, float | None], normalized: bool) -> str:
    v, dirdiff = f["rel_diff"], f["direction_diff"]
    if v is None:
        moved = f["engine_step_norm"] > 0
        return (f"{which} n/a (the gradient is 0 in float64: saturated softmax; engine step "
                f"{'NOT 0: DIFFER' if moved else '0 too'})")
    if v <= STEP_RTOL:
        return f"{which} {v:.2e} (agree)"
    if normalized and dirdiff is not None and dirdiff <= STEP_RTOL and f["engine_step_norm"] < f["step_norm"]:
        return (f"{which}: direction 1 − corr {dirdiff:.1e} (agree), length {f['engine_step_norm']:.2g} < lr "
                "(the engine's norm floor: the gradient is at float64's underflow)")
    if f["grad_max"] < GRAD_UNDERFLOW:
        return (f"{which} n/a (the gradient, max |∇| = {f['grad_max']:.2g}, is at float64's underflow; "
                f"engine step {f['engine_step_norm']:.2g})")
    return f"{which} {v:.2e} (DIFFER)"
