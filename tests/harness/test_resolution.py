"""The resolution seam (checks/power/resolution.py): a predicted object perturbed by a relative ε, and the
smallest ε a theorem's check catches. The perturbations are exact (a tilt by arcsin ε keeps the norm and
lies in the given span; a bound scales by 1 ∓ ε) and the seam is the identity outside `perturbed`."""

import numpy as np
import pytest

from checks import Profile, Theorem, decide
from checks.power.matrix import measure
from checks.power.resolution import LADDER, perturb, perturbed, predicted, token_difference_span
from numerics.data import random_unit_sphere


@pytest.mark.parametrize("eps", LADDER)
def test_a_tilt_is_exact_and_stays_in_its_span(eps):
    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(1))
    span = token_difference_span(data)
    W = sum(np.random.default_rng(2).standard_normal() * a for a in span)
    V = perturb(W, "direction", eps, np.random.default_rng(3), span)
    cos = float(np.sum(W * V) / (np.linalg.norm(W) * np.linalg.norm(V)))
    assert np.linalg.norm(V) == pytest.approx(np.linalg.norm(W), rel=1e-12)
    assert np.sqrt(max(0.0, 1 - cos**2)) == pytest.approx(eps, abs=1e-9)  # sin of the tilt angle is ε
    B = np.stack([a.reshape(-1) for a in span])
    resid = V.reshape(-1) - B.T @ np.linalg.lstsq(B.T, V.reshape(-1), rcond=None)[0]
    assert np.linalg.norm(resid) < 1e-9 * np.linalg.norm(V)  # inside the span of the SVM's solutions


def test_bounds_and_points():
    rng = np.random.default_rng(0)
    assert perturb(2.0, "upper", 0.1, rng) == pytest.approx(1.8)
    assert perturb(2.0, "lower", 0.1, rng) == pytest.approx(2.2)
    x = np.ones((2, 2))
    assert np.linalg.norm(perturb(x, "point", 0.1, rng) - x) == pytest.approx(0.1 * np.linalg.norm(x))
    assert perturb(x, "direction", 0.0, rng) is x
    values = {round(perturb(2.0, "value", 0.1, np.random.default_rng(k)), 12) for k in range(20)}
    assert values == {1.8, 2.2}  # a value is scaled by 1 ± ε, the sign seeded


def test_the_seam_is_the_identity_outside_a_perturbation():
    W = np.eye(3)
    assert predicted("t", "W", W, "direction") is W
    with perturbed(0.0) as st:
        assert predicted("t", "W", W, "direction") is W
    assert st.used == {"W (direction)"}
    with perturbed(0.5):  # the same object gets the same perturbation every time it is asked for
        a, b = predicted("t", "W", W, "direction"), predicted("t", "W", W, "direction")
    assert np.array_equal(a, b) and not np.allclose(a, W)


class _Sharp(Theorem):
    """Toy: the predicted direction e1 is compared with the exact answer at tolerance 1e-3 (1 − cos)."""

    id = "toy-sharp"
    reference = "tests"
    title = "toy"
    profiles = {"quick": Profile(instances=6, min_confirmed=5)}

    def instance(self, rng, ctx):
        return None

    def check_direction(self, inst, st, ctx):
        e1 = np.array([1.0, 0.0, 0.0])
        w = self.predicted("e1", e1, "direction")
        return decide(1 - float(w @ e1) < 1e-3, "off")


def test_measure_finds_the_smallest_error_caught():
    row = measure(_Sharp)
    assert row["clean"] == "PASS" and row["objects"] == ["e1 (direction)"]
    # 1 − cos(arcsin ε) < 1e-3 holds for ε ≤ 0.0447: ε = 0.05 is caught, 0.02 is not
    assert row["resolution"] == 0.05
    assert row["verdicts"]["0.02"] == "PASS" and row["verdicts"]["0.05"] == "FAIL"


def test_measured_figures_are_written_merged_and_read_back(tmp_path):
    """`power --resolution --write` merges rows by theorem id into the committed data file, keeps the rows
    of theorems not measured now and an unmet goal's limit, and `measured` reads a row back."""
    from checks.power.matrix import write_measured
    from checks.power.resolution import _measured_table, measured, summary

    path = tmp_path / "resolution.json"
    row = {"id": "t", "profile": "quick", "seed": 0, "clean": "PASS", "objects": ["W (direction)"],
           "verdicts": {"1": "FAIL"}, "resolution": 1.0, "goal": 0.05, "meets_goal": False}
    write_measured({"theorems": [row]}, path, limits={"t": "a 1/log k rate"})
    write_measured({"theorems": [dict(row, id="u", resolution=0.01, meets_goal=True)]}, path)
    write_measured({"theorems": [row]}, path)  # re-measured: the limit is kept
    _measured_table.cache_clear()
    assert measured("t", path)["limit"] == "a 1/log k rate"
    assert measured("u", path)["resolution"] == 0.01 and "limit" not in measured("u", path)
    assert measured("nope", path) is None
    assert summary(measured("t", path)) == "1.0 (quick, seed 0; goal 0.05 NOT met)"
    assert summary(None) == "not measured"


def test_list_and_report_carry_the_committed_resolution():
    """`attnsvm list --json` (describe) and report.json (TheoremResult) read the committed figures."""
    from checks import catalogue
    from checks.harness import TheoremResult
    from checks.plan import load_catalogue
    from checks.power.resolution import MEASURED, measured

    load_catalogue(())
    cls = next(c for c in catalogue.ordered() if c.id == "gd-local")
    row = measured("gd-local")
    assert MEASURED.is_file() and row is not None and row["profile"] == "quick" and "seed" in row
    assert cls.describe()["resolution"] == row
    assert "resolution" in TheoremResult.__dataclass_fields__
