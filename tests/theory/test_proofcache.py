"""theory.proofcache (issue 17): the symbolic proofs are computed once per machine and theory version and
loaded after that; a loaded proof is the computed one, a theory change or a damaged file computes afresh."""

from __future__ import annotations

import pickle

import sympy as sp

from theory import derivations, losses, proofcache


def _fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNSVM_CACHE", str(tmp_path))
    monkeypatch.delenv("ATTNSVM_NO_PROOF_CACHE", raising=False)


def test_a_loaded_proof_is_the_computed_one(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    derivations.kq_chain_rule.cache_clear()
    computed = derivations.kq_chain_rule(1, 2, 2, 2, variant="swapped-transposes")
    files = list((tmp_path / "proofs" / proofcache.version()).glob("*.pkl"))
    assert len(files) == 1
    derivations.kq_chain_rule.cache_clear()  # a new process: only the disk copy is left
    loaded = derivations.kq_chain_rule(1, 2, 2, 2, variant="swapped-transposes")
    assert loaded is not computed
    assert loaded.holds is computed.holds is False  # the control variant: refuted, with its counter-value
    assert loaded.lhs == computed.lhs and loaded.rhs == computed.rhs
    assert dict(loaded.sizes) == dict(computed.sizes) and type(loaded.sizes) is type(computed.sizes)
    assert loaded.counter_value.residual == computed.counter_value.residual
    derivations.kq_chain_rule.cache_clear()


def test_other_arguments_other_files_and_sympy_keys(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    losses._assumption_a.cache_clear()
    a = losses.assumption_a("exponential", B=2)
    b = losses.assumption_a("exponential", B=3)
    assert a.lipschitz_constant == sp.exp(2) and b.lipschitz_constant == sp.exp(3)
    assert len(list((tmp_path / "proofs" / proofcache.version()).glob("*.pkl"))) == 2
    losses._assumption_a.cache_clear()


def test_damaged_file_and_new_version_compute_afresh(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    calls = []

    @proofcache.disk_cached
    def proof(k):
        calls.append(k)
        return sp.Integer(k) ** 2

    assert proof(3) == 9 and calls == [3]
    proof.cache_clear()
    assert proof(3) == 9 and calls == [3]  # from disk
    (f,) = (tmp_path / "proofs" / proofcache.version()).glob("*.pkl")
    f.write_bytes(b"not a pickle")
    proof.cache_clear()
    assert proof(3) == 9 and calls == [3, 3]  # damaged: recomputed (and rewritten)
    assert pickle.loads(f.read_bytes()) == 9
    monkeypatch.setattr(proofcache, "version", lambda: "other")
    proofcache._PRUNED.clear()
    proof.cache_clear()
    assert proof(3) == 9 and calls == [3, 3, 3]  # another theory version: computed, old folder pruned
    assert [p.name for p in (tmp_path / "proofs").iterdir()] == ["other"]


def test_switched_off(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    monkeypatch.setenv("ATTNSVM_NO_PROOF_CACHE", "1")

    @proofcache.disk_cached
    def proof(k):
        return k + 1

    assert proof(1) == 2 and not (tmp_path / "proofs").exists()
