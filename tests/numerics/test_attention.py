"""numerics.attention: closed-form gradients == autograd == central differences, batching, stability."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numerics import attention as att
from numerics.data import AttentionData, random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.tolerances import GRAD_RTOL

DT = torch.float64


def _batch(R=3, n=4, T=5, d=6, *, self_attention=False, seed=0):
    datas = random_unit_sphere(n, T, d, rng=np.random.default_rng(seed), self_attention=self_attention, R=R)
    return att.batch_from_data(datas)


def _relu_head(R, d, h=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    return att.ReLUHead(torch.randn(R, d, h, generator=g, dtype=DT))


def _ref_loss(X, Y, Z, W, head_kind, head_param, loss):
    """Independent reference: einsum forward, plain formulas, differentiated by autograd."""
    lg = torch.einsum("rntd,rde,rne->rnt", X, W, Z)
    s = torch.softmax(lg, dim=-1)
    u = torch.einsum("rnt,rntd->rnd", s, X)
    if head_kind == "linear":
        f = torch.einsum("rnd,rd->rn", u, head_param)
    else:
        f = torch.relu(torch.einsum("rnd,rdh->rnh", u, head_param)).sum(-1)
    m = Y * f
    ell = {"logistic": lambda x: torch.log1p(torch.exp(-x)), "exponential": lambda x: torch.exp(-x),
           "linear": lambda x: -x}[loss]
    return ell(m).mean(-1)


def _rel(a, b):
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


CASES = [(hk, sa, loss) for hk in ("linear", "relu") for sa in (False, True) for loss in att.LOSSES]


@pytest.mark.parametrize("head_kind,self_attention,loss", CASES)
def test_grad_W_matches_autograd_and_central_differences(head_kind, self_attention, loss):
    b = _batch(self_attention=self_attention)
    R, n, T, d = b.shape
    head = b.linear_head() if head_kind == "linear" else _relu_head(R, d)
    hp = b.v if head_kind == "linear" else head.V
    W = torch.randn(R, d, d, generator=torch.Generator().manual_seed(2), dtype=DT)
    L, G = att.loss_and_grad_W(b.X, b.Y, b.Z, W, head, loss)
    Wa = W.clone().requires_grad_(True)
    Lref = _ref_loss(b.X, b.Y, b.Z, Wa, head_kind, hp, loss)
    (Ga,) = torch.autograd.grad(Lref.sum(), Wa)
    assert _rel(L, Lref.detach()) < 1e-12
    assert _rel(G, Ga) < GRAD_RTOL
    # central differences of the package's own loss along random directions, per instance
    h = 1e-5
    for k in range(3):
        D = torch.randn(R, d, d, generator=torch.Generator().manual_seed(10 + k), dtype=DT)
        fd = (
            att.loss(b.X, b.Y, b.Z, W + h * D, head, loss) - att.loss(b.X, b.Y, b.Z, W - h * D, head, loss)
        ) / (2 * h)
        exact = (G * D).sum((1, 2))
        assert _rel(fd, exact) < GRAD_RTOL


@pytest.mark.parametrize("head_kind,self_attention,loss", CASES)
def test_grad_KQ_matches_autograd_and_central_differences(head_kind, self_attention, loss):
    b = _batch(self_attention=self_attention, seed=3)
    R, n, T, d = b.shape
    m = 4
    head = b.linear_head() if head_kind == "linear" else _relu_head(R, d)
    hp = b.v if head_kind == "linear" else head.V
    g = torch.Generator().manual_seed(4)
    K, Q = torch.randn(R, d, m, generator=g, dtype=DT), torch.randn(R, d, m, generator=g, dtype=DT)
    gK, gQ = att.grad_KQ(b.X, b.Y, b.Z, K, Q, head, loss)
    Ka, Qa = K.clone().requires_grad_(True), Q.clone().requires_grad_(True)
    Lref = _ref_loss(b.X, b.Y, b.Z, Ka @ Qa.mT, head_kind, hp, loss)
    aK, aQ = torch.autograd.grad(Lref.sum(), (Ka, Qa))
    assert _rel(gK, aK) < GRAD_RTOL and _rel(gQ, aQ) < GRAD_RTOL
    h = 1e-5
    DK, DQ = torch.randn(R, d, m, generator=g, dtype=DT), torch.randn(R, d, m, generator=g, dtype=DT)

    def Lkq(k, q):
        return att.loss(b.X, b.Y, b.Z, k @ q.mT, head, loss)

    fd = (Lkq(K + h * DK, Q + h * DQ) - Lkq(K - h * DK, Q - h * DQ)) / (2 * h)
    exact = (gK * DK).sum((1, 2)) + (gQ * DQ).sum((1, 2))
    assert _rel(fd, exact) < GRAD_RTOL


def test_kq_chain_rule_transposes_matter():
    """Negative control: swapping the transposes gives a different (wrong) gradient."""
    b = _batch(seed=5)
    R, n, T, d = b.shape
    g = torch.Generator().manual_seed(6)
    K, Q = torch.randn(R, d, d, generator=g, dtype=DT), torch.randn(R, d, d, generator=g, dtype=DT)
    G = att.grad_W(b.X, b.Y, b.Z, K @ Q.mT, b.linear_head())
    gK, gQ = att.grad_KQ(b.X, b.Y, b.Z, K, Q, b.linear_head())
    assert _rel(gK, G @ Q) < 1e-14 and _rel(gQ, G.mT @ K) < 1e-14
    assert _rel(G.mT @ Q, gK) > 1e-3


def test_batched_equals_per_instance():
    datas = random_unit_sphere(4, 5, 6, rng=np.random.default_rng(7), R=4)
    b = att.batch_from_data(datas)
    W = torch.randn(4, 6, 6, generator=torch.Generator().manual_seed(8), dtype=DT)
    L, G = att.loss_and_grad_W(b.X, b.Y, b.Z, W, b.linear_head())
    for r, dt in enumerate(datas):
        br = att.batch_from_data(dt)
        Lr, Gr = att.loss_and_grad_W(br.X, br.Y, br.Z, W[r : r + 1], br.linear_head())
        torch.testing.assert_close(Lr[0], L[r], rtol=1e-13, atol=0)
        torch.testing.assert_close(Gr[0], G[r], rtol=1e-12, atol=1e-15)


def test_shared_head_parameters_broadcast():
    b = _batch(R=2, seed=9)
    R, n, T, d = b.shape
    V = torch.randn(d, 5, generator=torch.Generator().manual_seed(0), dtype=DT)
    W = torch.randn(R, d, d, generator=torch.Generator().manual_seed(1), dtype=DT)
    shared = att.grad_W(b.X, b.Y, b.Z, W, att.ReLUHead(V))
    per = att.grad_W(b.X, b.Y, b.Z, W, att.ReLUHead(V.expand(R, d, 5)))
    torch.testing.assert_close(shared, per)
    v = b.v[0]
    torch.testing.assert_close(att.forward(b.X, b.Z, W, att.LinearHead(v)),
                               att.forward(b.X, b.Z, W, att.LinearHead(v.expand(R, d))))


def test_softmax_stable_at_huge_norm():
    b = _batch(seed=11)
    R, n, T, d = b.shape
    W = torch.randn(R, d, d, generator=torch.Generator().manual_seed(12), dtype=DT)
    W = 1e6 * W / torch.linalg.matrix_norm(W, keepdim=True)
    s = att.softmax(b.X, b.Z, W)
    assert torch.isfinite(s).all()
    torch.testing.assert_close(s.sum(-1), torch.ones(R, n, dtype=DT))
    for loss in att.LOSSES:
        L, G = att.loss_and_grad_W(b.X, b.Y, b.Z, W, b.linear_head(), loss)
        assert torch.isfinite(L).all() and torch.isfinite(G).all()


def test_losses_stable_and_derivatives():
    u = torch.tensor([-800.0, -30.0, 0.0, 30.0, 800.0], dtype=DT)
    lv = att.loss_value(u, "logistic")
    assert torch.isfinite(lv).all() and lv[-1] == 0 and abs(float(lv[0]) - 800.0) < 1e-9
    torch.testing.assert_close(att.loss_derivative(u, "logistic"), -torch.sigmoid(-u))
    for loss in att.LOSSES:
        x = torch.linspace(-3, 3, 7, dtype=DT, requires_grad=True)
        (ga,) = torch.autograd.grad(att.loss_value(x, loss).sum(), x)
        torch.testing.assert_close(att.loss_derivative(x.detach(), loss), ga)
    with pytest.raises(InvalidInputError, match="unknown loss 'squared'"):
        att.loss_value(u, "squared")
    with pytest.raises(InvalidInputError, match="unknown loss"):
        att.loss_derivative(u, "hinge")


@pytest.mark.parametrize("self_attention", [False, True])
def test_token_gram_dense_and_factored_agree_with_explicit_W(self_attention):
    b = _batch(R=2, n=3, T=4, d=5, self_attention=self_attention, seed=13)
    c = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(14), dtype=DT)
    G = att.TokenGram(b.X, b.Z).weights_to_W(c)  # sum_j X_j^T c_j z_j^T
    direct = torch.einsum("rntd,rde,rne->rnt", b.X, G, b.Z)
    for dense in (True, False):
        gram = att.TokenGram(b.X, b.Z, dense=dense)
        Mc = gram.apply(c)
        torch.testing.assert_close(Mc, direct, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(
            (c * Mc).sum((1, 2)), torch.linalg.matrix_norm(G) ** 2, rtol=1e-12, atol=1e-12
        )


def test_batch_from_data_and_head_errors():
    dt = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0))
    nohead = AttentionData(dt.X, dt.Y)
    b = att.batch_from_data([dt, nohead])
    assert b.v is None and b.shape == (2, 3, 4, 5)
    assert torch.equal(b.Z[1], b.X[1, :, 0])  # self-attention queries resolved
    with pytest.raises(InvalidInputError, match="dataset 1 has no linear head"):
        att.batch_from_data([dt, nohead], require_head=True)
    with pytest.raises(InvalidInputError, match="linear head is needed"):
        b.linear_head()
    with pytest.raises(InvalidInputError, match="shape"):
        att.batch_from_data([dt, random_unit_sphere(3, 4, 6, rng=np.random.default_rng(1))])
    with pytest.raises(InvalidInputError, match="AttentionData"):
        att.batch_from_data([np.zeros(3)])
    assert att.batch_from_data(dt, dtype=torch.float32).X.dtype == torch.float32
    with pytest.raises(InvalidInputError, match="LinearHead v"):
        att.LinearHead(torch.zeros(2, 3, 4))
    with pytest.raises(InvalidInputError, match="ReLUHead V"):
        att.ReLUHead(torch.zeros(3))
    W = torch.zeros(1, 4, 4, dtype=DT)
    with pytest.raises(InvalidInputError, match=r"W must have shape \(R, d, d\)"):
        att.logits(att.batch_from_data(dt).X, att.batch_from_data(dt).Z, W)
