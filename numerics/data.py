"""Validated attention datasets and the paper's random instance families.

Shapes follow the paper's symbols: X (n, T, d) tokens, Y (n,) labels in {-1, +1}, Z (n, d) queries
(``None`` = self-attention, z_i = x_i1), v (d,) linear head.

Examples
--------
>>> import numpy as np
>>> data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0))
>>> (data.n, data.T, data.d), data.self_attention
((3, 4, 5), False)
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from .errors import InvalidInputError
from .fileio import write_bytes

NPZ_KEYS = ("X", "Y", "Z", "v")


def _to_numpy(name: str, a: Any) -> np.ndarray:
    """Convert an array-like or torch tensor to a float64 numpy array, with a clear error."""
    if a is None:
        raise InvalidInputError(f"{name} is missing")
    if hasattr(a, "detach") and hasattr(a, "cpu"):  # torch tensor, without importing torch
        a = a.detach().cpu().numpy()
    arr = np.asarray(a)
    if arr.dtype == object or arr.dtype.kind in "OUSVMm":
        raise InvalidInputError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.dtype.kind == "c":
        raise InvalidInputError(f"{name} must be real, got complex dtype {arr.dtype}")
    if arr.size == 0:
        raise InvalidInputError(f"{name} is empty (shape {arr.shape})")
    arr = arr.astype(np.float64, copy=True)
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise InvalidInputError(f"{name} contains {bad} non-finite value(s) (NaN or Inf)")
    arr.setflags(write=False)
    return arr


def _float64_note(name: str, a: np.ndarray) -> str | None:
    """The .npz contract is float64. Narrower floats, integers and booleans convert exactly, so they are
    accepted with a note saying so; a conversion that would round (wider floats, integers beyond 2**53)
    is refused, since checking a theorem on silently rounded data is a wrong answer.

    >>> _float64_note("X", np.zeros(2, np.float32))
    'X: float32 converted to float64 (exact)'
    """
    kind, dt = a.dtype.kind, a.dtype
    if dt == np.float64 or kind not in "fiub":
        return None  # float64 already, or a type _to_numpy rejects with its own message
    if kind == "f" and dt.itemsize > 8:
        raise InvalidInputError(
            f"{name} has dtype {dt}, which does not convert to float64 exactly; save it as float64"
        )
    if kind in "iu" and a.size and int(np.abs(a.astype(object)).max()) > 2**53:
        raise InvalidInputError(f"{name} has {dt} entries beyond 2**53, which float64 cannot hold exactly")
    return f"{name}: {dt} converted to float64 (exact)"



def read_npz(path: str | os.PathLike, allowed: Sequence[str],
             required: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays of an .npz archive, read with ``allow_pickle=False`` (object arrays, hence ragged ones, are
    refused), keys checked against ``allowed`` and ``required``. Every malformed file gets a one-line
    :class:`InvalidInputError` naming the file. The one reader of every dataset format (attention, NTP)."""
    path = Path(path)
    if not path.exists():
        raise InvalidInputError(f"{path}: no such file")
    if path.is_dir():
        raise InvalidInputError(f"{path}: is a directory, expected an .npz file")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a plain .npy array has no context manager
            raise InvalidInputError(f"{path}: not an .npz archive (got a single .npy array)")
        with loaded as npz:
            keys = set(npz.files)
            unknown = keys - set(allowed)
            if unknown:
                raise InvalidInputError(
                    f"{path}: unexpected key(s) {sorted(unknown)}; allowed keys are {', '.join(allowed)}"
                )
            for key in required:
                if key not in keys:
                    raise InvalidInputError(
                        f"{path}: missing required key '{key}' (keys present: {sorted(keys)})"
                    )
            return {k: npz[k] for k in keys}
    except InvalidInputError:
        raise
    except ValueError as exc:
        if "Object arrays" in str(exc):
            raise InvalidInputError(
                f"{path}: contains object (pickled) arrays, which are never loaded (a ragged array is one)"
            ) from None
        if "contains pickled" in str(exc):  # np.load's fallback for a file that is neither .npz nor .npy
            raise InvalidInputError(
                f"{path}: not an .npz archive (neither a zip file nor an .npy array)"
            ) from None
        raise InvalidInputError(f"{path}: not a readable .npz file ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise InvalidInputError(
            f"{path}: not a readable .npz file ({type(exc).__name__}: {exc})"
        ) from None
    except Exception as exc:  # numpy raises assorted errors on truncated/corrupt members
        raise InvalidInputError(f"{path}: corrupt .npz file ({type(exc).__name__}: {exc})") from None


class AttentionData:
    """One attention dataset (X, Y, Z, v), validated on construction, float64, read-only.

    Parameters
    ----------
    X : array (n, T, d)
        Tokens x_it (rows of X_i).
    Y : array (n,)
        Labels, each exactly -1 or +1.
    Z : array (n, d), optional
        Queries z_i (cross-attention). ``None`` means self-attention: z_i = x_i1 = ``X[i, 0]``.
    v : array (d,), optional
        Linear head. Required by anything that needs token scores.
    """

    __slots__ = ("X", "Y", "_Z", "v", "notes")

    def __init__(self, X: Any, Y: Any, Z: Any = None, v: Any = None):
        X = _to_numpy("X", X)
        if X.ndim != 3:
            raise InvalidInputError(f"X must have shape (n, T, d), got {X.ndim}-D shape {X.shape}")
        n, T, d = X.shape
        if T < 2:
            raise InvalidInputError(f"X must have at least T=2 tokens per example, got T={T}")
        Y = _to_numpy("Y", Y)
        if Y.ndim != 1 or Y.shape[0] != n:
            raise InvalidInputError(f"Y must have shape (n,) = ({n},) to match X, got {Y.shape}")
        if not np.all(np.abs(Y) == 1.0):
            bad = np.unique(Y[np.abs(Y) != 1.0])[:5]
            raise InvalidInputError(f"Y must contain only -1 and +1, found {bad.tolist()}")
        if Z is not None:
            Z = _to_numpy("Z", Z)
            if Z.shape != (n, d):
                raise InvalidInputError(f"Z must have shape (n, d) = ({n}, {d}) to match X, got {Z.shape}")
        if v is not None:
            v = _to_numpy("v", v)
            if v.shape != (d,):
                raise InvalidInputError(f"v must have shape (d,) = ({d},) to match X, got {v.shape}")
        self.X, self.Y, self._Z, self.v = X, Y, Z, v
        self.notes: tuple[str, ...] = ()  # what loading changed (e.g. float32 converted to float64)

    # -- shape -------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def T(self) -> int:
        return self.X.shape[1]

    @property
    def d(self) -> int:
        return self.X.shape[2]

    @property
    def self_attention(self) -> bool:
        """True when queries are the first tokens (no explicit Z)."""
        return self._Z is None

    @property
    def Z(self) -> np.ndarray:
        """Queries (n, d): the given Z, or ``X[:, 0]`` for self-attention."""
        return self.X[:, 0, :] if self._Z is None else self._Z

    def require_head(self) -> np.ndarray:
        """The linear head v, or a clear error when the dataset has none."""
        if self.v is None:
            raise InvalidInputError("this dataset has no linear head v; add key 'v' (shape (d,)) to the .npz")
        return self.v

    def with_head(self, v: Any) -> AttentionData:
        return AttentionData(self.X, self.Y, self._Z, v)

    def subset(self, idx: Any) -> AttentionData:
        idx = np.atleast_1d(np.asarray(idx))
        return AttentionData(self.X[idx], self.Y[idx], None if self._Z is None else self._Z[idx], self.v)

    def __repr__(self) -> str:
        kind = "self" if self.self_attention else "cross"
        head = "no head" if self.v is None else "linear head"
        return f"AttentionData(n={self.n}, T={self.T}, d={self.d}, {kind}-attention, {head})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttentionData):
            return NotImplemented

        def same(a, b):
            return (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))

        return (
            same(self.X, other.X)
            and same(self.Y, other.Y)
            and same(self._Z, other._Z)
            and same(self.v, other.v)
        )

    __hash__ = None  # type: ignore[assignment]

    # -- torch ---------------------------------------------------------------------------------
    def to_torch(self, device: str = "cpu", dtype: Any = None) -> dict[str, Any]:
        """Tensors X, Y, Z (queries resolved), v (or None) on ``device``, float64 by default."""
        import torch

        dtype = torch.float64 if dtype is None else dtype
        t: dict[str, Any] = {
            k: torch.as_tensor(getattr(self, k), dtype=dtype, device=device) for k in ("X", "Y", "Z")
        }
        t["v"] = None if self.v is None else torch.as_tensor(self.v, dtype=dtype, device=device)
        return t

    # -- files -------------------------------------------------------------------------------
    def to_npz_bytes(self) -> bytes:
        arrays = {"X": self.X, "Y": self.Y}
        if self._Z is not None:
            arrays["Z"] = self._Z
        if self.v is not None:
            arrays["v"] = self.v
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    def save(self, path: str | os.PathLike) -> None:
        """Write the .npz contract (X, Y, optional Z, optional v; float64), atomically."""
        write_bytes(path, self.to_npz_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike) -> AttentionData:
        """Read an .npz dataset. Never unpickles; every malformed file gets a one-line error."""
        path = Path(path)
        arrays = read_npz(path, NPZ_KEYS, ("X", "Y"))
        try:
            notes = tuple(
                n for k in ("X", "Z", "v") if k in arrays for n in [_float64_note(k, arrays[k])] if n
            )
            data = cls(arrays["X"], arrays["Y"], arrays.get("Z"), arrays.get("v"))
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: {exc}") from None
        data.notes = tuple(f"{path}: {n}" for n in notes)
        return data


# -- random families ------------------------------------------------------------------------

def _unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    a = rng.standard_normal(shape)
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


@overload
def random_unit_sphere(n: int, T: int, d: int, *, rng: np.random.Generator, self_attention: bool = False,
                       R: None = None) -> AttentionData: ...
@overload
def random_unit_sphere(n: int, T: int, d: int, *, rng: np.random.Generator, self_attention: bool = False,
                       R: int) -> list[AttentionData]: ...


def random_unit_sphere(
    n: int,
    T: int,
    d: int,
    *,
    rng: np.random.Generator,
    self_attention: bool = False,
    R: int | None = None,
) -> AttentionData | list[AttentionData]:
    """The paper's random family: unit tokens, unit queries, unit head, random +-1 labels.

    With ``R`` given, returns a list of R independent instances drawn in one vectorised call.
    ``self_attention=True`` omits Z (queries are the first tokens).
    """
    for name, val, lo in (("n", n, 1), ("T", T, 2), ("d", d, 1)):
        if int(val) != val or val < lo:
            raise InvalidInputError(f"{name} must be an integer >= {lo}, got {val!r}")
    reps = 1 if R is None else int(R)
    if reps < 1:
        raise InvalidInputError(f"R must be >= 1, got {R!r}")
    X = _unit_rows(rng, (reps, n, T, d))
    Z = None if self_attention else _unit_rows(rng, (reps, n, d))
    v = _unit_rows(rng, (reps, d))
    Y = rng.choice(np.array([-1.0, 1.0]), size=(reps, n))
    out = [AttentionData(X[r], Y[r], None if Z is None else Z[r], v[r]) for r in range(reps)]
    return out[0] if R is None else out


def stack(datas: Sequence[AttentionData]) -> dict[str, np.ndarray]:
    """Stack equal-shape datasets into batched arrays X (R,n,T,d), Y (R,n), Z (R,n,d), v (R,d)."""
    if isinstance(datas, AttentionData):
        datas = [datas]
    if len(datas) == 0:
        raise InvalidInputError("need at least one dataset")
    shape = (datas[0].n, datas[0].T, datas[0].d)
    for k, dt in enumerate(datas):
        if (dt.n, dt.T, dt.d) != shape:
            raise InvalidInputError(
                f"dataset {k} has shape {(dt.n, dt.T, dt.d)}, expected {shape} like dataset 0"
            )
    out = {
        "X": np.stack([dt.X for dt in datas]),
        "Y": np.stack([dt.Y for dt in datas]),
        "Z": np.stack([dt.Z for dt in datas]),
    }
    if all(dt.v is not None for dt in datas):
        out["v"] = np.stack([dt.v for dt in datas])
    return out


def load_digits_data(classes: tuple[int, int] = (0, 1), per_class: int = 30) -> AttentionData:
    """Real data: scikit-learn's bundled handwritten digits as an attention dataset.

    Two classes become labels -1/+1 (``classes[0]`` -> -1); each 8x8 image (pixels scaled to [0, 1])
    is cut into four 4x4 patches, the tokens (T=4, d=16); the query is the mean patch (cross-attention);
    the head v is the unit difference of the two classes' mean tokens (a fixed, data-derived linear head).
    The first ``per_class`` images of each class are used (deterministic; no download).
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - scikit-learn is a dependency
        raise InvalidInputError(f"--data digits needs scikit-learn ({exc})") from None
    if len(classes) != 2 or classes[0] == classes[1] or not all(0 <= c <= 9 for c in classes):
        raise InvalidInputError(f"classes must be two distinct digits 0..9, got {classes!r}")
    if per_class < 1:
        raise InvalidInputError(f"per_class must be >= 1, got {per_class}")
    digits = load_digits()
    imgs, labels = digits.images / 16.0, digits.target
    keep = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in classes])
    keep.sort()
    imgs, labels = imgs[keep], labels[keep]
    # (N, 8, 8) -> (N, 2, 4, 2, 4) -> (N, 2, 2, 4, 4) -> (N, 4, 16): four 4x4 patches per image
    X = imgs.reshape(-1, 2, 4, 2, 4).transpose(0, 1, 3, 2, 4).reshape(-1, 4, 16)
    Y = np.where(labels == classes[1], 1.0, -1.0)
    Z = X.mean(axis=1)  # (N, 16) mean patch as query
    mean_tok = X.mean(axis=1)
    v = mean_tok[Y > 0].mean(axis=0) - mean_tok[Y < 0].mean(axis=0)
    v = v / np.linalg.norm(v)
    return AttentionData(X, Y, Z, v)
