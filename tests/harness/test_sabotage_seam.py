"""The sabotage seam of the power analysis (checks/power/sabotage.py) is the only way numerics/ reaches a
softmax, a gradient, a causal mask or an SVM solver: a sabotage that patches the seam must reach every
caller. The static scan below fails when a new direct call bypasses it (``torch.softmax(``, ``.softmax(``,
a hand-written max-subtracted ``exp``, ``tril``, a solver call outside the solver functions, an autograd
gradient); the behavioural tests show that the softmax sabotage reaches grad_W, grad_KQ, the prompt and
sequence maps and the numpy softmax.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

from checks.power.sabotage import sabotage
from numerics import attention as att
from numerics import prompt, sequence, tokens
from numerics.data import random_unit_sphere

NUMERICS = Path(__file__).resolve().parents[2] / "numerics"

#: (file relative to numerics/, function) -> why a direct call there is the seam itself or is sabotaged whole.
SOFTMAX_SEAM = {
    ("attention.py", "softmax_logits"): "the torch softmax seam",
    ("tokens.py", "softmax_rows"): "the numpy softmax seam",
    ("gd_common.py", "_softmax_rows"): "the GD-step softmax seam",
}
MASK_SEAM = {
    ("sequence.py", "causal_mask"): "the torch causal mask seam",
    ("svm/sequence.py", "solve_seq_svm"): "the causal SVM: causal-mask-off patches solve_seq_svm itself",
}
#: SVM solvers live inside _hard_margin_core (svm-fro) and _solve_nuclear_ladder (svm-nuc), which the SVM
#: sabotages patch; GenFin's BFGS is its own finite-time solver (its softmax goes through softmax_rows).
SOLVER_SEAM = {
    ("svm/core.py", "_ldp_nnls"), ("svm/core.py", "_polish"), ("svm/core.py", "_farkas_lp"),
    ("svm/core.py", "_qp_cvxpy"), ("svm/core.py", "_core_attempt"), ("svm/nuclear.py", "_nuclear_sdp"),
    ("svm/nuclear.py", "_nuclear_dual_direct"), ("genfin.py", "finite_part"),
    # the lp-AttSVM's power-cone solve: component svm-lp, broken by scaled-svm (md-global depends on it)
    ("svm/lp.py", "_solve_cvxpy"),
    # the rank-constrained factored multi-start (nuclear-factorisation, rp-kq-rank): a local solver whose best
    # point is certified against the SDP bound (>= it, feasible, balanced); the bound's SDP is svm-nuc's
    ("svm/factorised.py", "_local"),
    # next-token prediction (numerics/ntp.py): the graph-SVM's nuclear program with equality rows, the finite
    # part W^fin (Newton on S_fin) and the regularisation path on the sphere. The sabotages
    # ntp-equalities-dropped (component svm-ntp: graph_rows, the rows every graph-SVM solve reads) and
    # scaled-finite-part (ntp-fin: finite_part's answer, and the linear model's W⋆) reach them; the sphere
    # path's Newton solver has none yet (listed, not hidden)
    ("ntp.py", "_nuclear_with_equalities"), ("ntp.py", "finite_part"), ("ntp.py", "_newton"),
    ("ntp.py", "_sphere_newton"), ("ntp.py", "solve_at"),
    # ntp-gd's quasi-static offset of the finite part (H⁻¹ Π g_supp, a linear solve with L_fin's Hessian at
    # W^fin): scaled-finite-part moves W^fin (and H with it) and ntp-gd then fails; the offset itself has no
    # sabotage of its own (listed, not hidden: it is ∝ the suppressed mass, 1e-5..1e-3 on quick seeds 0-10)
    ("ntp.py", "fin_offset"),
    # a starting point of the prompt path search (an ℓ∞ max-margin LP), not an answer any check reads: the
    # prompt-path sabotages break the search itself, and a broken start can only leave a path undecided
    ("prompt_path.py", "selection_start"),
}
SOLVER_CALLS = {"Problem", "linprog", "nnls", "minimize", "solve"}
#: Gradients: the attention gradient of W (and of K, Q, and every GD step) is
#: numerics.attention.grad_from_weights, which transposed-gradient patches; the prompt / sequence / GenFin
#: gradients are closed forms of their own components (broken by the GD sabotages). Autograd is used only by
#: the joint (v, p) path's own objective (component vp-path, broken by noop-gd): any other ``.backward(`` /
#: ``autograd.grad(`` bypasses the seam.
AUTOGRAD_SEAM = {("prompt.py", "_vp_path_one"), ("prompt.py", "closure")}


def _calls(path: Path):
    """(enclosing top-level or method function name, call node) for every call in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []

    def visit(node, fn):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            if isinstance(child, ast.Call):
                out.append((name, child))
            visit(child, name)

    visit(tree, "<module>")
    return out


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _direct_softmax(call: ast.Call, rel: str) -> bool:
    """torch.softmax / F.softmax / x.softmax / a bare imported softmax; not attention.softmax (the seam's
    own wrapper: ``att.softmax(`` or, inside attention.py, ``softmax(``)."""
    f = call.func
    if _name(call) not in ("softmax", "log_softmax"):
        return False
    if isinstance(f, ast.Attribute):
        return not (isinstance(f.value, ast.Name) and f.value.id in ("att", "attention"))
    return rel != "attention.py"


def _is_max_shift(node) -> bool:
    """``a - a.max(...)`` / ``a - a.amax(...)``: the first half of a hand-written softmax."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Call)
            and _name(node.right) in ("max", "amax"))


def _bypasses():
    hits = []
    for path in sorted(NUMERICS.rglob("*.py")):
        rel = path.relative_to(NUMERICS).as_posix()
        for fn, call in _calls(path):
            name, where = _name(call), f"numerics/{rel}:{call.lineno} in {fn}"
            if _direct_softmax(call, rel) and (rel, fn) not in SOFTMAX_SEAM:
                hits.append(f"{where}: direct {name}(")
            exp_arg = call.func.value if isinstance(call.func, ast.Attribute) and not call.args else (
                call.args[0] if call.args else None)
            if name in ("exp", "exp_") and _is_max_shift(exp_arg) and (rel, fn) not in SOFTMAX_SEAM:
                hits.append(f"{where}: hand-written softmax exp(x - max)")
            if name in ("tril", "triu") and (rel, fn) not in MASK_SEAM:
                hits.append(f"{where}: a mask built outside causal_mask")
            if name in SOLVER_CALLS and (rel, fn) not in SOLVER_SEAM:
                hits.append(f"{where}: a solver call outside the SVM solver functions")
            autograd = name == "backward" or (name == "grad" and isinstance(call.func, ast.Attribute)
                                              and isinstance(call.func.value, ast.Attribute)
                                              and call.func.value.attr == "autograd")
            if autograd and (rel, fn) not in AUTOGRAD_SEAM:
                hits.append(f"{where}: an autograd gradient outside grad_from_weights")
    return hits


def test_no_direct_call_bypasses_the_sabotage_seam():
    hits = _bypasses()
    assert not hits, ("route these through the seam (numerics.attention.softmax_logits, "
                      "numerics.tokens.softmax_rows, numerics.sequence.causal_mask, the SVM cores) or add "
                      "them to the seam table with the sabotage that reaches them:\n" + "\n".join(hits))


def test_scan_catches_a_direct_softmax(tmp_path, monkeypatch):
    (tmp_path / "new.py").write_text(
        "import torch\nimport numpy as np\n"
        "def f(x):\n    return torch.softmax(x, dim=-1)\n"
        "def g(x):\n    e = np.exp(x - x.max(-1, keepdims=True))\n    return e / e.sum()\n"
        "def h(T):\n    return torch.tril(torch.ones(T, T))\n"
        "def k(x, W):\n    return torch.autograd.grad((x @ W).sum(), W)\n"
    )
    monkeypatch.setattr(__import__(__name__), "NUMERICS", tmp_path)
    hits = _bypasses()
    assert [h.split(": ", 1)[1] for h in hits] == [
        "direct softmax(", "hand-written softmax exp(x - max)", "a mask built outside causal_mask",
        "an autograd gradient outside grad_from_weights"], hits


@pytest.fixture(scope="module")
def batch():
    return att.batch_from_data(random_unit_sphere(4, 3, 3, rng=np.random.default_rng(1)))


def _changed(f):
    clean = f()
    with sabotage("softmax-no-normaliser"):
        broken = f()
    return not torch.allclose(torch.as_tensor(clean), torch.as_tensor(broken), rtol=1e-6, atol=0)


def test_softmax_sabotage_reaches_every_caller(batch):
    b = batch
    W = torch.as_tensor(np.random.default_rng(2).standard_normal((1, 3, 3)))
    K = torch.as_tensor(np.random.default_rng(3).standard_normal((1, 3, 2)))
    head = b.linear_head()
    data = random_unit_sphere(4, 3, 3, rng=np.random.default_rng(1))
    g = torch.as_tensor(np.random.default_rng(4).standard_normal((1, 4, 3)))
    p = torch.as_tensor(np.random.default_rng(5).standard_normal((1, 3)))
    assert _changed(lambda: att.grad_W(b.X, b.Y, b.Z, W, head))  # the hole of issue 28's walk-through
    assert _changed(lambda: att.grad_KQ(b.X, b.Y, b.Z, K, K, head)[0])
    assert _changed(lambda: att.loss(b.X, b.Y, b.Z, W, head))
    assert _changed(lambda: tokens.softmax_probs(data, W[0].numpy()))
    assert _changed(lambda: prompt.prompt_grad(b.X, g, p))
    assert _changed(lambda: sequence.seq_probs(b.X, W))


def test_gd_sabotages_reach_ntp_gd():
    """NTP GD (numerics.ntp_gd.run_ntp_gd) and linear-NTP GD (numerics.ntp_linear.run_linear_gd) run on the GD
    engine, so the step-hook sabotages reach them: no-op leaves W(0) = 0, lr-half / lr-double change the
    iterates, and the softmax sabotage reaches both models' gradients (component "ntp-gd")."""
    from numerics.ntp import random_ntp, smoothness_bound
    from numerics.ntp_gd import run_ntp_gd
    from numerics.ntp_linear import random_linear_ntp, run_linear_gd, smoothness

    data = random_ntp(np.random.default_rng(0), 6, 3, 5, 8, kind="cyclic")[0]
    prob = random_linear_ntp(np.random.default_rng(0), 4, 8, 6)

    def runs():
        a = run_ntp_gd([data], steps=20, lr=1 / smoothness_bound(data), record_at=[20]).W_traj[-1]
        b = run_linear_gd([prob], steps=20, lr=1 / (2 * smoothness(prob)), record_at=[20]).W_traj[-1]
        return a, b

    clean = runs()
    assert all(np.any(w) for w in clean)
    for name in ("noop-gd", "lr-half", "lr-double", "softmax-no-normaliser"):
        with sabotage(name):
            broken = runs()
        for c, w in zip(clean, broken, strict=True):
            assert not np.allclose(c, w, rtol=1e-6, atol=0), name
            if name == "noop-gd":
                assert not np.any(w)
