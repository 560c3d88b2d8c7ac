r"""Finite sums with symbolic bounds: a normal form that decides identities for *every* size at once.

An expression here is built from sympy ``Sum(f, (x, 1, N))`` with a symbolic upper bound N (n, T, d or m,
positive integer symbols), ``Indexed`` entries (``X[i, t, p]``), ordinary symbols and opaque functions
(``exp``, ``ell'``, negative powers of a sum). :func:`normal_form` rewrites such an expression into a sum of
terms ``c * Sum(monomial, (x_1, 1, N_1), ...)`` using only rules that hold for every positive integer
value of the bounds:

1. linearity: ``Sum(a + b) = Sum(a) + Sum(b)``, ``Sum(c a) = c Sum(a)`` for c free of the dummy;
2. finite Fubini: products of sums are one multi-index sum, and the order of summation is irrelevant;
3. alpha-renaming of bound variables (a canonical renaming is chosen by trying every permutation);
4. ``Sum(c, (x, 1, N)) = N c`` when c does not contain x;
5. commutative-ring arithmetic on the remaining atoms (sympy ``Mul``/``Add``); an atom that is a function
   of a sum (``exp(Sum(...))``, ``1/Sum(...)``) is normalised inside and then treated as opaque;
6. ``Sum(KroneckerDelta(x, j) f(x), (x, 1, N)) = f(j)`` when j ranges over [1, N] (sifting);
7. optional *folds*: a known sum (e.g. ``Sum(s[t], (t, 1, T)) = 1`` or ``Sum(e[t]) = S``) is replaced by
   its value wherever it occurs as a closed factor of a term.

Two expressions are equal for every size if the normal form of their difference has no term
(:func:`is_zero`). The converse is not claimed: a non-empty normal form is "not proved", never "false";
refutations come from concrete counter-values at fixed sizes (:mod:`theory.derivations`).

Kronecker deltas from ``sympy.diff`` (d X[i,t,p] / d X[i,t,j] = delta_pj) are sifted by rule 6, with the
hypothesis 1 <= j <= N for every free index j given in ``ranges``; sympy's ``doit`` is never needed.

Examples
--------
>>> T = sp.Symbol("T", integer=True, positive=True)
>>> t, u = sp.symbols("t u", integer=True, positive=True)
>>> a, b = sp.IndexedBase("a"), sp.IndexedBase("b")
>>> lhs = sp.Sum(a[t], (t, 1, T)) * sp.Sum(b[u], (u, 1, T))
>>> rhs = sp.Sum(sp.Sum(a[u] * b[t], (t, 1, T)), (u, 1, T))
>>> is_zero(lhs - rhs)
True
>>> is_zero(sp.Sum(a[t] * b[t], (t, 1, T)) - rhs)
False
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import sympy as sp

from numerics.errors import InvalidInputError

#: Above this many bound variables in one term the canonical renaming would try too many permutations.
MAX_DUMMIES = 7

_counter = itertools.count()


def index(name: str) -> sp.Symbol:
    """A positive integer symbol (an index or a size)."""
    return sp.Symbol(name, integer=True, positive=True)


def _fresh() -> sp.Symbol:
    return sp.Symbol(f"_f{next(_counter)}", integer=True, positive=True)


def _canon_name(depth: int, k: int) -> sp.Symbol:
    return sp.Symbol(f"_c{depth}_{k}", integer=True, positive=True)


# -- the normal form ----------------------------------------------------------------------------------

def _atom(e, depth: int):
    """Canonical form of an opaque atom: its arguments normalised one level deeper."""
    if isinstance(e, (sp.Symbol, sp.Number, sp.NumberSymbol)) or e.is_Atom:
        return e
    if isinstance(e, sp.Indexed):
        return e
    if isinstance(e, sp.Pow):
        return sp.Pow(canonical(e.base, depth + 1), e.exp)
    if isinstance(e, sp.Piecewise):
        raise InvalidInputError(
            "normal_form: Piecewise expressions are not supported (no doit() before normalising)"
        )
    return e.func(*[canonical(a, depth + 1) if isinstance(a, sp.Basic) and not isinstance(a, sp.Tuple) else a
                    for a in e.args])


def _terms(e, depth: int) -> list[tuple[tuple, sp.Expr]]:
    """Expand into [(dummies ((x, N), ...), product of atoms)]; dummies renamed fresh (no capture)."""
    if isinstance(e, sp.Add):
        return [t for a in e.args for t in _terms(a, depth)]
    if isinstance(e, sp.Mul):
        out: list = [((), sp.S.One)]
        for a in e.args:
            part = _terms(a, depth)
            out = [(d1 + d2, f1 * f2) for d1, f1 in out for d2, f2 in part]
        return out
    if isinstance(e, sp.Pow) and e.exp.is_Integer and e.exp > 0 and (e.base.is_Add or e.base.has(sp.Sum)):
        return _terms(sp.Mul(*([e.base] * int(e.exp)), evaluate=False), depth)
    if isinstance(e, sp.Sum):
        body = e.function
        dums: list = []
        for lim in e.limits:
            if len(lim) != 3 or lim[1] != 1:
                raise InvalidInputError(f"normal_form: sums must run from 1, got limits {lim}")
            x, _, N = lim
            if any(N.has(x0) for x0, _ in dums):
                raise InvalidInputError(f"normal_form: bound {N} depends on another dummy")
            f = _fresh()
            body = body.xreplace({x: f})
            dums.append((f, N))
        return [(tuple(dums) + d, fac) for d, fac in _terms(body, depth)]
    return [((), _atom(e, depth))]


def _sift(dums: tuple, fac: sp.Expr, ranges: dict) -> tuple[tuple, sp.Expr]:
    """Rule 6: Sum(KroneckerDelta(x, y) f(x), (x, 1, N)) = f(y) when y ranges over [1, N] too (y another
    dummy with bound N, or a free index with ``ranges[y] == N``)."""
    bounds = dict(dums)
    changed = True
    while changed:
        changed = False
        for kd in [f for f in sp.Mul.make_args(fac) if isinstance(f, sp.KroneckerDelta)]:
            for x, y in (kd.args, kd.args[::-1]):
                if x in bounds and (
                    bounds.get(y) == bounds[x] or (y not in bounds and ranges.get(y) == bounds[x])
                ):
                    fac = (fac / kd).xreplace({x: y})
                    del bounds[x]
                    dums = tuple(p for p in dums if p[0] != x)
                    changed = True
                    break
            if changed:
                break
    return dums, fac


def _canon_term(dums: tuple, fac: sp.Expr, depth: int) -> tuple[tuple, sp.Expr]:
    """Drop dummies absent from the factor (rule 4) and rename the rest canonically (rule 3)."""
    free = fac.free_symbols
    keep = []
    for x, N in dums:
        if x in free:
            keep.append((x, N))
        else:
            fac = fac * N
    if len(keep) > MAX_DUMMIES:
        raise InvalidInputError(f"normal_form: {len(keep)} bound variables in one term (max {MAX_DUMMIES})")
    # Order the dummies by a renaming-invariant signature; only ties are permuted. Any renaming is an
    # equality, so the choice only affects completeness (identical forms are always equal), never soundness.
    sig = {x: _signature(x, N, fac) for x, N in keep}
    keep.sort(key=lambda p: sig[p[0]])
    groups = [list(g) for _, g in itertools.groupby(keep, key=lambda p: sig[p[0]])]
    best = None
    for choice in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [p for g in choice for p in g]
        rep = {x: _canon_name(depth, a) for a, (x, _) in enumerate(order)}
        f2 = fac.xreplace(rep)
        lims = tuple((rep[x], N) for x, N in order)
        key = sp.srepr(f2)
        if best is None or key < best[0]:
            best = (key, lims, f2)
    assert best is not None  # itertools.product of permutations yields at least one choice
    return best[1], best[2]


def _signature(x, N, fac) -> tuple:
    """Where x occurs, up to renaming: (bound, sorted (factor label, index position) occurrences)."""
    occ = []
    for f in sp.Mul.make_args(fac):
        if x not in f.free_symbols:
            continue
        base, e = (f.base, f.exp) if isinstance(f, sp.Pow) else (f, 1)
        if isinstance(base, sp.Indexed):
            occ += [(str(base.base), str(e), k) for k, ix in enumerate(base.indices) if ix == x]
        else:
            occ.append((type(base).__name__, str(e), -1))
    return (str(N), tuple(sorted(occ)))


def _fold(terms: list, folds: dict, depth: int) -> list:
    """Rule 7: replace a closed factor Sum(F_x, x) of a term by its known value."""
    if not folds:
        return terms
    keys = {canonical(k, depth + 1): canonical(sp.sympify(v), depth + 1) for k, v in folds.items()}
    out = []
    for dums, fac in terms:
        changed = True
        while changed:
            changed = False
            names = {x for x, _ in dums}
            for x, N in dums:
                parts = sp.Mul.make_args(fac)
                dep = [p for p in parts if x in p.free_symbols]
                if not dep or any((p.free_symbols & (names - {x})) for p in dep):
                    continue
                Fx = sp.Mul(*dep)
                cand = canonical(sp.Sum(Fx, (x, 1, N)), depth + 1)
                if cand in keys:
                    fac = sp.Mul(*[p for p in parts if x not in p.free_symbols]) * keys[cand]
                    dums = tuple(p for p in dums if p[0] != x)
                    changed = True
                    break
        out.append((dums, fac))
    return out


def normal_form(expr, folds: dict | None = None, depth: int = 0, ranges: dict | None = None) -> dict:
    """{(limits, monomial): coefficient} with zero coefficients removed (see the module docstring).

    ``ranges`` maps free indices to their upper bounds (hypothesis 1 <= j <= N), used to sift deltas."""
    terms = _terms(sp.sympify(expr), depth)
    terms = [_sift(dm, fac, ranges or {}) for dm, fac in terms]
    terms = _fold(terms, folds or {}, depth)
    acc: dict = defaultdict(lambda: sp.S.Zero)
    for dums, fac in terms:
        lims, f2 = _canon_term(dums, fac, depth)
        c, rest = f2.as_coeff_Mul()
        acc[(lims, rest)] += c
    return {k: v for k, v in acc.items() if v != 0}


def canonical(expr, depth: int = 0, folds: dict | None = None) -> sp.Expr:
    """The normal form as one sympy expression (a sum of canonical ``Sum`` terms)."""
    nf = normal_form(expr, folds, depth)
    parts = []
    for (lims, rest), c in sorted(nf.items(), key=lambda kv: (str(kv[0][0]), sp.srepr(kv[0][1]))):
        body = c * rest
        parts.append(sp.Sum(body, *[(x, 1, N) for x, N in lims]) if lims else body)
    return sp.Add(*parts)


def is_zero(expr, folds: dict | None = None, ranges: dict | None = None) -> bool:
    """True iff the normal form of ``expr`` is empty: then expr = 0 for every value of the sizes."""
    return not normal_form(expr, folds, ranges=ranges)


def residual_terms(expr, folds: dict | None = None, ranges: dict | None = None) -> int:
    """Number of terms left in the normal form (0 means proved)."""
    return len(normal_form(expr, folds, ranges=ranges))
