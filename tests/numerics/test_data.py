"""numerics.data: AttentionData validation, the .npz loader's rejections, round trips, loader fuzz."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from numerics.data import AttentionData, random_unit_sphere, stack
from numerics.errors import InvalidInputError


def _valid(n=3, T=4, d=5, seed=0):
    return random_unit_sphere(n, T, d, rng=np.random.default_rng(seed))


def _arrays(**over):
    dt = _valid()
    a = {"X": dt.X.copy(), "Y": dt.Y.copy(), "Z": dt.Z.copy(), "v": dt.v.copy()}
    a.update(over)
    return {k: v for k, v in a.items() if v is not None}


# -- construction --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "over,match",
    [
        (dict(X=np.full((3, 4, 5), np.nan)), r"X contains 60 non-finite"),
        (dict(Y=np.array([1.0, np.inf, -1.0])), r"Y contains 1 non-finite"),
        (dict(Z=np.full((3, 5), -np.inf)), r"Z contains 15 non-finite"),
        (dict(v=np.array([0, 0, np.nan, 0, 0.0])), r"v contains 1 non-finite"),
        (dict(X=np.zeros((3, 20))), r"X must have shape \(n, T, d\), got 2-D"),
        (dict(X=np.zeros((3, 4, 5, 1))), r"X must have shape \(n, T, d\), got 4-D"),
        (dict(Y=np.ones(4)), r"Y must have shape \(n,\) = \(3,\)"),
        (dict(Y=np.ones((3, 1))), r"Y must have shape"),
        (dict(Z=np.zeros((3, 4))), r"Z must have shape \(n, d\) = \(3, 5\)"),
        (dict(Z=np.zeros((2, 5))), r"Z must have shape"),
        (dict(v=np.zeros(4)), r"v must have shape \(d,\) = \(5,\)"),
        (dict(Y=np.array([1.0, 0.0, -1.0])), r"Y must contain only -1 and \+1, found \[0.0\]"),
        (dict(Y=np.array([1.0, 2.0, -1.5])), r"only -1 and \+1"),
        (dict(X=np.zeros((3, 1, 5))), r"at least T=2 tokens"),
        (dict(X=np.zeros((0, 4, 5))), r"X is empty"),
        (dict(Y=np.array([])), r"Y is empty"),
        (dict(X=np.array([["a"]])), r"X must be a numeric array"),
        (dict(Y=np.array([1, -1, 1], dtype=object)), r"Y must be a numeric array, got dtype object"),
        (dict(v=np.zeros(5, dtype=complex)), r"v must be real"),
    ],
)
def test_construction_rejections(over, match):
    a = _arrays(**over)
    with pytest.raises(InvalidInputError, match=match):
        AttentionData(a["X"], a["Y"], a.get("Z"), a.get("v"))


def test_missing_array_and_properties():
    with pytest.raises(InvalidInputError, match="X is missing"):
        AttentionData(None, [1.0])
    dt = _valid()
    assert (dt.n, dt.T, dt.d) == (3, 4, 5) and not dt.self_attention
    sa = AttentionData(dt.X, dt.Y)
    assert sa.self_attention and np.array_equal(sa.Z, dt.X[:, 0])
    with pytest.raises(InvalidInputError, match="no linear head"):
        sa.require_head()
    assert not dt.X.flags.writeable  # read-only after validation
    assert np.array_equal(dt.subset([0, 2]).X, dt.X[[0, 2]])
    assert dt.with_head(np.ones(5)).v.tolist() == [1.0] * 5
    assert "cross-attention" in repr(dt) and "self-attention" in repr(sa)


def test_integer_labels_and_torch_inputs_accepted():
    torch = pytest.importorskip("torch")
    dt = _valid()
    a = AttentionData(torch.tensor(dt.X), np.array([1, -1, 1]), torch.tensor(dt.Z), list(dt.v))
    assert a.X.dtype == np.float64 and a.Y.tolist() == [1.0, -1.0, 1.0]


def test_stack():
    ds = random_unit_sphere(2, 3, 4, rng=np.random.default_rng(1), R=3)
    s = stack(ds)
    assert s["X"].shape == (3, 2, 3, 4) and s["Z"].shape == (3, 2, 4) and s["v"].shape == (3, 4)
    assert "v" not in stack([ds[0], AttentionData(ds[1].X, ds[1].Y)])
    with pytest.raises(InvalidInputError, match="dataset 1 has shape"):
        stack([ds[0], _valid()])
    with pytest.raises(InvalidInputError, match="at least one"):
        stack([])


def test_random_family_validation():
    for kw, match in ((dict(n=0, T=3, d=2), "n must be"), (dict(n=2, T=1, d=2), "T must be"),
                      (dict(n=2, T=3, d=2.5), "d must be")):
        with pytest.raises(InvalidInputError, match=match):
            random_unit_sphere(**kw, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="R must be"):
        random_unit_sphere(2, 3, 2, rng=np.random.default_rng(0), R=0)


# -- files -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("self_attention", [False, True])
@pytest.mark.parametrize("with_head", [False, True])
def test_round_trip(tmp_path, self_attention, with_head):
    dt = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(2), self_attention=self_attention)
    if not with_head:
        dt = AttentionData(dt.X, dt.Y, None if self_attention else dt.Z)
    p = tmp_path / "d.npz"
    dt.save(p)
    back = AttentionData.load(p)
    assert back == dt and back.self_attention == self_attention and (back.v is None) == (not with_head)
    with np.load(p) as z:
        assert set(z.files) == {"X", "Y"} | ({"Z"} if not self_attention else set()) | (
            {"v"} if with_head else set()
        )


def _save(path, **arrays):
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def test_loader_rejects_bad_values(tmp_path):
    cases = [
        (dict(X=np.full((3, 4, 5), np.nan)), "non-finite"),
        (dict(X=np.zeros((3, 4))), "X must have shape"),
        (dict(Y=np.ones(2)), "Y must have shape"),
        (dict(Z=np.zeros((3, 2))), "Z must have shape"),
        (dict(v=np.zeros(7)), "v must have shape"),
        (dict(Y=np.array([1.0, 3.0, -1.0])), "only -1 and"),
        (dict(X=np.zeros((3, 1, 5))), "at least T=2"),
        (dict(X=np.zeros((0, 4, 5))), "X is empty"),
        (dict(X=np.array(["a", "b"])), "numeric array"),
    ]
    for k, (over, match) in enumerate(cases):
        p = _save(tmp_path / f"bad{k}.npz", **_arrays(**over))
        with pytest.raises(InvalidInputError, match=match) as ei:
            AttentionData.load(p)
        assert str(p) in str(ei.value)  # the message names the file


def test_loader_rejects_bad_files(tmp_path):
    good = _save(tmp_path / "good.npz", **_arrays())
    AttentionData.load(good)
    cases = []
    p = tmp_path / "text.npz"
    p.write_text("this is not an archive")
    cases.append((p, "not a readable .npz|corrupt|not an .npz"))
    p = tmp_path / "trunc.npz"
    p.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    cases.append((p, "not a readable .npz|corrupt"))
    p = tmp_path / "single.npy"
    np.save(p, np.zeros((3, 4, 5)))
    cases.append((p, "not an .npz archive"))
    p = tmp_path / "obj.npz"
    _save(p, X=np.array([object(), None], dtype=object), Y=np.ones(2))
    cases.append((p, "object \\(pickled\\) arrays"))
    p = _save(tmp_path / "nox.npz", Y=np.ones(3))
    cases.append((p, "missing required key 'X'"))
    p = _save(tmp_path / "noy.npz", X=np.zeros((3, 4, 5)))
    cases.append((p, "missing required key 'Y'"))
    p = _save(tmp_path / "extra.npz", **_arrays(), W=np.eye(5))
    cases.append((p, r"unexpected key\(s\) \['W'\]"))
    cases.append((tmp_path / "absent.npz", "no such file"))
    cases.append((tmp_path, "is a directory"))
    p = tmp_path / "empty.npz"
    p.write_bytes(b"")
    cases.append((p, "not a readable|corrupt|not an .npz"))
    for path, match in cases:
        with pytest.raises(InvalidInputError, match=match):
            AttentionData.load(path)


def test_loader_rejects_corrupt_member(tmp_path):
    """A valid zip whose member is not a valid .npy."""
    p = tmp_path / "member.npz"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("X.npy", b"\x93NUMPY garbage")
        zf.writestr("Y.npy", b"")
    with pytest.raises(InvalidInputError, match=str(p).replace("\\", "\\\\")):
        AttentionData.load(p)


# -- fuzz --------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _load_or_invalid(path):
    try:
        out = AttentionData.load(path)
    except InvalidInputError:
        return None
    assert isinstance(out, AttentionData)
    return out


@FUZZ
@given(data=st.binary(max_size=400), prefix=st.sampled_from([b"", b"PK\x03\x04", b"\x93NUMPY"]))
def test_fuzz_random_bytes(tmp_path, data, prefix):
    p = tmp_path / "fuzz.npz"
    p.write_bytes(prefix + data)
    _load_or_invalid(p)


_dtypes = st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.bool_, np.complex128, np.uint8])
_shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)


@FUZZ
@given(
    arrays=st.dictionaries(
        st.sampled_from(["X", "Y", "Z", "v", "W"]),
        _dtypes.flatmap(lambda dt: hnp.arrays(dt, _shapes)),
        max_size=5,
    ),
    truncate=st.sampled_from([None, 10, 100]),
)
def test_fuzz_random_arrays(tmp_path, arrays, truncate):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    raw = buf.getvalue()
    p = tmp_path / "fuzz.npz"
    p.write_bytes(raw if truncate is None else raw[:truncate])
    out = _load_or_invalid(p)
    if out is not None:
        assert out.X.ndim == 3 and out.T >= 2 and np.all(np.abs(out.Y) == 1)


@FUZZ
@given(X=hnp.arrays(np.float64, hnp.array_shapes(min_dims=3, max_dims=3, min_side=1, max_side=3),
                    elements=st.floats(-1e3, 1e3)),
       signs=st.lists(st.sampled_from([-1.0, 1.0]), min_size=1, max_size=3))
def test_fuzz_valid_round_trip(tmp_path, X, signs):
    n = X.shape[0]
    Y = np.resize(np.array(signs), n)
    p = tmp_path / "ok.npz"
    _save(p, X=X, Y=Y)
    out = _load_or_invalid(p)
    if X.shape[1] >= 2:
        assert out is not None and np.array_equal(out.X, X) and out.self_attention
    else:
        assert out is None
