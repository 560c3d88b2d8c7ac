"""Resolution: the smallest error in a predicted object that a theorem's check catches (issue 23).

A check that PASSes on the right answer says little until it is shown to FAIL on a nearly right one. Each
prediction that compares the numerics with a predicted object (a max-margin direction, a finite part, a
bound) hands that object to :func:`predicted` (the one seam, called through ``Theorem.predicted``) before
comparing. Normally the object comes back unchanged. Under :func:`perturbed` (``attnsvm power
--resolution``) it comes back perturbed by a relative amount ε, seeded by (theorem, instance, object name):

* ``"direction"``: tilted by the angle arcsin ε, towards a random unit direction orthogonal to it inside
  ``span`` (the subspace the theorem's SVM solutions live in: the span of the token-difference matrices
  (x_it − x_iτ) z_iᵀ for W), its norm kept;
* ``"upper"`` / ``"lower"`` (a bound the numerics must stay below / above): scaled by 1 − ε / 1 + ε, the
  direction in which a too-optimistic bound would err;
* ``"point"`` (e.g. a finite part W^fin): moved by ε‖obj‖ in a random direction inside ``span``;
* ``"value"`` (a scalar the numerics must equal, e.g. the ‖W‖_⋆ a factorised minimum attains): scaled by
  1 ± ε, the sign seeded as a point's direction is (a value errs either way; a bound errs one way).

:func:`checks.power.matrix.measure` runs a theorem at the ladder ε ∈ LADDER and reports the smallest ε at
which its verdict is FAIL: the check's resolution. A theorem whose checks call no seam has no measured
resolution (``None``), which the report says instead of guessing. This module imports nothing of the
harness: the theorems call it.

The measured figures live in one committed data file, ``checks/power/resolution.json`` (MEASURED), written
by ``attnsvm power --resolution --write`` (rows merged by theorem id); ``attnsvm list --json`` and
report.json read it through :func:`measured` without re-running anything.
"""

from __future__ import annotations

import contextlib
import functools
import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The relative sizes of perturbation tried, largest first (issue 23).
LADDER = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01)
KINDS = ("direction", "upper", "lower", "point", "value")
#: The committed measurements (``attnsvm power --resolution --write``): {"theorems": {id: row}}.
MEASURED = Path(__file__).with_name("resolution.json")


@dataclass
class _State:
    eps: float
    used: set[str] = field(default_factory=set)


_ACTIVE: list[_State] = []


@contextlib.contextmanager
def perturbed(eps: float) -> Iterator[_State]:
    """Within: every predicted object handed to :func:`predicted` is perturbed by ``eps`` (0: only recorded,
    so a clean run says which objects a theorem declares)."""
    if not 0 <= eps <= 1:
        raise ValueError(f"a relative perturbation lies in [0, 1], got {eps}")
    st = _State(float(eps))
    _ACTIVE.append(st)
    try:
        yield st
    finally:
        _ACTIVE.remove(st)


def _rng(theorem: str, name: str, obj: Any) -> np.random.Generator:
    """Seeded by the theorem, the object's name and the object itself (rounded to 8 significant digits, so
    the several predictions of one instance that ask for the same object get the same perturbation)."""
    x = np.asarray(obj, dtype=float)
    key = np.format_float_scientific if x.ndim == 0 else None
    text = key(float(x), precision=8) if key else np.array2string(x.reshape(-1), precision=8, threshold=10**9)
    return np.random.default_rng([zlib.crc32(theorem.encode()), zlib.crc32(name.encode()),
                                  zlib.crc32(text.encode())])


def _orthonormal_basis(span: Sequence[np.ndarray] | None, shape: tuple[int, ...]) -> np.ndarray:
    """(k, size) orthonormal rows spanning ``span`` (the whole space when None)."""
    size = int(np.prod(shape))
    if span is None or len(span) == 0:
        return np.eye(size)
    A = np.stack([np.asarray(a, dtype=float).reshape(-1) for a in span])
    u, s, vt = np.linalg.svd(A, full_matrices=False)
    keep = s > s.max() * 1e-10 if s.size and s.max() > 0 else np.zeros(0, bool)
    return vt[keep]


def _random_in(basis: np.ndarray, rng: np.random.Generator, avoid: np.ndarray | None) -> np.ndarray | None:
    """A random unit vector in the row span of ``basis``, orthogonal to ``avoid`` (None if none exists)."""
    v = rng.standard_normal(basis.shape[0]) @ basis
    if avoid is not None:
        a = avoid / np.linalg.norm(avoid)
        v = v - (v @ a) * a
    n = np.linalg.norm(v)
    return None if n < 1e-12 else v / n


def perturb(obj: Any, kind: str, eps: float, rng: np.random.Generator,
            span: Sequence[np.ndarray] | None = None) -> Any:
    """``obj`` perturbed by the relative amount ``eps`` (see the module docstring); ``eps = 0``: unchanged."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if eps == 0:
        return obj
    if kind == "upper":
        return obj * (1.0 - eps)
    if kind == "lower":
        return obj * (1.0 + eps)
    if kind == "value":
        return obj * (1.0 + eps * (1.0 if rng.random() < 0.5 else -1.0))
    x = np.asarray(obj, dtype=float)
    flat, norm = x.reshape(-1), float(np.linalg.norm(x))
    if norm == 0:
        return obj
    basis = _orthonormal_basis(span, x.shape)
    if kind == "point":
        v = _random_in(basis, rng, None)
        return x if v is None else (flat + eps * norm * v).reshape(x.shape)
    u = _random_in(basis, rng, flat)
    if u is None:  # the span holds only the direction itself: nothing to tilt towards inside it
        u = _random_in(np.eye(flat.size), rng, flat)
    theta = float(np.arcsin(min(eps, 1.0)))
    return ((np.cos(theta) * flat / norm + np.sin(theta) * u) * norm).reshape(x.shape)


#: The relative size of :func:`tilt_fin`: a finite-part check confirms only where its run tells W^fin from
#: W^fin tilted by TILT·‖W^fin‖ inside S_fin (gen-svm, the NTP checks; issue 23).
TILT = 0.10


def tilt_fin(W_fin: np.ndarray, basis: np.ndarray, size: float = TILT, sign: float = 1.0) -> np.ndarray:
    """W^fin moved by size·‖W^fin‖ inside S_fin (orthonormal ``basis`` (k, ...) of W^fin's shape):
    perpendicular to W^fin where dim S_fin ≥ 2 (the basis element least aligned with W^fin, orthogonalised: a
    rotation of the finite part), along it where S_fin is a line (a rescaling by 1 ± size). The fixed,
    deterministic perturbation the finite-part checks resolve their prediction against (a candidate limit),
    beside the seeded ones of :func:`perturb`."""
    W_fin = np.asarray(W_fin, dtype=float)
    nw = float(np.linalg.norm(W_fin))
    if nw == 0 or not len(basis):
        return W_fin.copy()
    w = W_fin / nw
    u = w
    if len(basis) >= 2:
        B = basis[int(np.argmin(np.abs(np.einsum("kde,de->k", basis, w))))]
        u = B - np.sum(B * w) * w
        u /= np.linalg.norm(u)
    return W_fin + sign * size * nw * u


def predicted(theorem: str, name: str, obj: Any, kind: str,
              span: Sequence[np.ndarray] | Callable[[], Sequence[np.ndarray]] | None = None) -> Any:
    """The seam: ``obj`` as the prediction compares with it (perturbed under :func:`perturbed`). ``span``
    may be a function returning the span, called only when the object is perturbed (normal runs never
    build it)."""
    if not _ACTIVE:
        return obj
    if callable(span):
        span = span()
    st = _ACTIVE[-1]
    st.used.add(f"{name} ({kind})")
    return perturb(obj, kind, st.eps, _rng(theorem, name, obj), span)


def token_difference_span(data: Any) -> list[np.ndarray]:
    """The span the W-SVM solutions of ``data`` live in: (x_it − x_iτ) z_iᵀ over examples and token pairs
    (every Att-SVM constraint matrix, for any selection α)."""
    X, Z = np.asarray(data.X, float), np.asarray(data.Z, float)
    out = []
    for i in range(X.shape[0]):
        for t in range(1, X.shape[1]):
            out.append(np.outer(X[i, t] - X[i, 0], Z[i]))
    return out


@functools.cache
def _measured_table(path: str) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    rows = data.get("theorems") if isinstance(data, dict) else None
    return rows if isinstance(rows, dict) else {}


def measured(theorem_id: str, path: Path | None = None) -> dict[str, Any] | None:
    """The committed resolution of ``theorem_id`` ({resolution, epsilon_ladder verdicts, goal, meets_goal,
    objects, profile, seed, measured, limit}) from MEASURED, or None when it was never measured."""
    row = _measured_table(str(path or MEASURED)).get(theorem_id)
    return dict(row) if isinstance(row, dict) else None


def summary(row: dict[str, Any] | None) -> str:
    """One cell of the catalogue table: "0.05 (quick, seed 0; goal 0.05 met)", "none declared", "not
    measured"."""
    if row is None:
        return "not measured"
    if not row.get("objects"):
        return "no predicted object"
    res = row.get("resolution")
    where = f"{row.get('profile')}, seed {row.get('seed')}"
    if row.get("clean") not in (None, "PASS"):
        return f"undefined: the clean verdict is {row['clean']} ({where})"
    goal = row.get("goal")
    met = "met" if row.get("meets_goal") else "NOT met"
    return f"{res if res is not None else 'none'} ({where}; goal {goal:g} {met})" if goal is not None else (
        f"{res if res is not None else 'none'} ({where})")
