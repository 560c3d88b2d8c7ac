"""How a theorem is defined: one class per paper statement, registered with ``@register``.

A theorem says what it claims (``statement``), when the claim applies (``assume_*`` methods: the
hypotheses) and what it predicts (``check_*`` methods: the predictions), plus how to draw instances.
An unmet hypothesis makes an instance *vacuous*, never a failure; a failed prediction on an instance
whose hypotheses all held makes it *refuted* (a counterexample).

Minimal example (a complete plugin file, see ``examples/plugin_theorem.py``)::

    import numpy as np
    from checks import Theorem, Profile, register, held, failed
    from numerics.data import random_unit_sphere
    from numerics.tokens import softmax_probs

    @register
    class SoftmaxSumsToOne(Theorem):
        id = "softmax-simplex"
        title = "Attention probabilities lie on the simplex"
        reference = "TLTO §2"
        statement = r"s_i(W) \\in \\Delta^{T-1}"
        profiles = {"quick": Profile(instances=10, min_confirmed=10)}

        def instance(self, rng, ctx):
            return random_unit_sphere(3, 4, 5, rng=rng)

        def check_sums(self, data, state, ctx):
            s = softmax_probs(data, ctx.rng.standard_normal((data.d, data.d)))
            err = abs(s.sum(axis=1) - 1).max()
            return held(err=err) if err < 1e-12 else failed("rows do not sum to 1", err=err)

Hypotheses return ``True``/``False`` (or an :class:`Outcome`); predictions return an :class:`Outcome`
built with :func:`held`, :func:`failed` or :func:`undecided` (budget/precision too small: the
instance becomes inconclusive). Raising :class:`numerics.errors.SolverError` makes the instance an
*error* carrying the solver's status.

What the report shows (all optional):

- ``criteria``: the decision rules, as a tuple of :class:`Criterion` (quantity, comparison, threshold),
  e.g. ``Criterion("1 - corr(W(k), W^mm) at the last iterate", "<", 1e-2, plot_metric="corr_err_curve")``.
  They are printed in every report format and written to report.json (``criteria: [{name, rule, value}]``);
  a criterion with ``plot_metric`` draws its threshold as a line on that metric's figure panel (a criterion
  on ``X`` also on the panel of the curve ``X_curve``).
- ``theorem_number``: the paper's numbering where known (``"TLTO Thm 2"``), shown beside ``reference``.
- ``sizes(inst)``: the instance's sizes, recorded in each instance's metrics (default: ``n``, ``T``, ``d``
  of the :class:`~numerics.data.AttentionData` found in the instance; add ``m`` for a key-query width).
- Series: a metric named ``<name>_curve`` (a list) is plotted per instance, coloured by outcome. Its
  x-axis is the GD iteration when the instance also records ``<name>_iterations`` (or ``iterations``),
  a list of the same length giving the iteration of each recorded value; the radius R when it records
  ``<name>_radii`` (a regularisation path); otherwise the record index. Positive x values on a grid spanning
  a decade or more (k = S/32, …, S; R = 1, 2, …, 128) are drawn on a log x-axis.
  A curve whose name says it is an error (``err``, e.g. 1 - corr) is drawn on a log y-axis.
  ``plot_scales = {"ratio": "linear"}`` chooses a panel's y scale by metric name instead.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final, NoReturn

import numpy as np

PROFILES = ("quick", "full", "paper")
EXPECTED = ("PASS", "FAIL")


@dataclass(frozen=True)
class Profile:
    """How many instances a profile draws, how many must be confirmed for PASS, and free parameters."""

    instances: int
    min_confirmed: int
    params: dict[str, Any] = field(default_factory=dict)
    batch: int = 16  # instances prepared together (batched GD); small enough to interrupt quickly
    #: PASS also needs inconclusive <= max_inconclusive * (instances - vacuous): a check that leaves many
    #: instances undecided has not shown the claim, however many others it confirmed. None: the bound of
    #: the profile of that name in DEFAULT_PROFILES (resolved by Theorem.profile).
    max_inconclusive: float | None = None

    def __post_init__(self):
        if self.instances < 1 or not (1 <= self.min_confirmed <= self.instances):
            raise ValueError(f"bad profile: instances={self.instances}, min_confirmed={self.min_confirmed}")
        if self.max_inconclusive is not None and not 0.0 <= self.max_inconclusive <= 1.0:
            raise ValueError(f"bad profile: max_inconclusive={self.max_inconclusive} must lie in [0, 1]")


#: quick draws few instances, so one undecided instance is 1/8 of it: a quarter may stay undecided there;
#: the larger profiles have the budget to decide, so at most a fifth.
DEFAULT_PROFILES = {
    "quick": Profile(instances=8, min_confirmed=5, max_inconclusive=0.25),
    "full": Profile(instances=60, min_confirmed=50, max_inconclusive=0.2),
    "paper": Profile(instances=200, min_confirmed=150, max_inconclusive=0.2),
}


@dataclass(frozen=True)
class Criterion:
    """One decision rule of a theorem, as the report prints it: ``name rule value``, e.g.
    ``Criterion("1 - corr(W(k), W^mm) at the last iterate", "<", 1e-2)``. ``plot_metric`` names the
    metric (a per-instance value or a ``*_curve``) on whose figure panel ``value`` is drawn as a line."""

    name: str
    rule: str
    value: Any = None
    plot_metric: str | None = None

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name and isinstance(self.rule, str) and self.rule):
            raise ValueError(f"Criterion needs a non-empty name and rule, got {self.name!r}, {self.rule!r}")

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "rule": self.rule.strip(), "value": self.value}
        if self.plot_metric:
            out["plot_metric"] = self.plot_metric
        return out


def find_data(inst: Any) -> Any:
    """The :class:`~numerics.data.AttentionData` an instance carries: the instance itself, an element of a
    tuple/list, ``inst["data"]`` or ``inst.data``; None when there is none."""
    from numerics.data import AttentionData

    if isinstance(inst, AttentionData):
        return inst
    if isinstance(inst, (tuple, list)):
        return next((x for x in inst if isinstance(x, AttentionData)), None)
    cand = inst.get("data") if isinstance(inst, dict) else getattr(inst, "data", None)
    return cand if isinstance(cand, AttentionData) else None


@dataclass(frozen=True)
class Outcome:
    """The decision of one hypothesis or prediction on one instance."""

    status: str  # "held" | "failed" | "undecided"
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in ("held", "failed", "undecided"):
            raise ValueError(f"Outcome.status must be held|failed|undecided, got {self.status!r}")


def held(**metrics: Any) -> Outcome:
    """The claim (or hypothesis) held on this instance; ``metrics`` are recorded in the report."""
    return Outcome("held", "", metrics)


def failed(reason: str, **metrics: Any) -> Outcome:
    """The claim (or hypothesis) is false on this instance, with a reason naming the measured quantity."""
    return Outcome("failed", reason, metrics)


def undecided(reason: str, **metrics: Any) -> Outcome:
    """Budget or precision too small to decide: the instance becomes inconclusive, never confirmed."""
    return Outcome("undecided", reason, metrics)


def decide(condition: bool, reason_if_false: str, **metrics: Any) -> Outcome:
    """``held(**metrics)`` if ``condition`` else ``failed(reason_if_false, **metrics)``."""
    return held(**metrics) if bool(condition) else failed(reason_if_false, **metrics)


@dataclass
class Context:
    """What a theorem's methods may use besides the instance: profile, device, per-instance RNG."""

    profile: str
    params: dict[str, Any]
    device: str
    rng: np.random.Generator
    seed: int
    instance: int
    data: Any = None  # user-given data (--data), or None


class _Withdrawn:
    """The value of an inherited ``assume_*`` / ``check_*`` method a subclass drops (:data:`WITHDRAWN`)."""

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this hypothesis or prediction is withdrawn in this class (checks.WITHDRAWN)")

    def __repr__(self) -> str:
        return "WITHDRAWN"


#: An inherited hypothesis or prediction a subclass drops, with the reason beside it:
#: ``check_margin = WITHDRAWN  # the control's false claim is the direction alone``. It is not a function,
#: so the harness does not collect it (:meth:`Theorem.hypothesis_names`, :meth:`Theorem.prediction_names`);
#: calling it raises. Typed as a callable, so it overrides a method without breaking the type check.
WITHDRAWN: Final = _Withdrawn()


class Theorem:
    """Base class of every theorem and negative control. Subclass, set the class attributes, add
    ``instance``, optional ``prepare``, ``assume_*`` and ``check_*`` methods."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    statement: ClassVar[str] = ""  # LaTeX
    expected: ClassVar[str] = "PASS"
    control_of: ClassVar[str | None] = None
    #: hypotheses the check implements, stated in words (docs and reports)
    hypotheses_text: ClassVar[str] = ""
    profiles: ClassVar[dict[str, Profile]] = DEFAULT_PROFILES
    #: does this theorem run on user-given data (--data)? Override ``not_applicable`` for details.
    accepts_data: ClassVar[bool] = False
    #: the dataset format the theorem's claim is about: "attention" (numerics.data.AttentionData: X, Y, ...)
    #: or "ntp" (numerics.ntp.NTPData: E, tokens, labels); given data of the other format is not applicable
    data_kind: ClassVar[str] = "attention"
    #: A documented finding: the reconstructed claim is known to be false under the hypotheses
    #: implemented (a genuine counterexample), with the reason. The check keeps its expectation and
    #: its verdict. Never set this to hide a bug.
    finding: ClassVar[str | None] = None
    #: Where the finding's counterexamples were seen: {(profile, seed): (instance, ...)}. A FAIL whose
    #: refuted instances are all listed here for this run's profile and seed is reported as KNOWN FINDING
    #: and does not fail the run (pytest: a strict xfail there); any other refutation fails the run.
    finding_seen: ClassVar[dict[tuple[str, int], tuple[int, ...]]] = {}
    #: The finding recognised by its mechanism, not by instance number: ``finding_mechanism(result)`` gets
    #: one refuted instance's :class:`~checks.harness.InstanceResult` (its metrics, predictions and reason,
    #: as in results.jsonl) and returns True when that refutation is the documented mechanism. When it is
    #: defined, a FAIL whose refuted instances all match it is KNOWN FINDING on any profile and seed
    #: (``finding_seen`` then only documents where it was seen); any other refutation fails the run. Without
    #: it, the refuted instances must be listed in ``finding_seen`` for the run's profile and seed. Either way
    #: the other instances must decide the theorem on their own (PASS without the finding's instances): a
    #: finding never hides them.
    finding_mechanism: ClassVar[Callable[[Any], bool] | None] = None
    #: Measured, documented undecidability: the theorem's own algorithm cannot decide its claim on its
    #: own family in float64 on any profile (e.g. plain GD from the theorem's cone, whose first step is
    #: below the rounding of W), with the measured reason. Its INCONCLUSIVE is then reported as
    #: UNDECIDABLE: quiet, never a PASS, named with the reason in the summary and the report; a FAIL or an
    #: ERROR still fails the run, and so does VACUOUS. A control of such a theorem states it too. Never set
    #: this for a budget that a longer run would meet: that is INCONCLUSIVE and fails the run.
    undecidable: ClassVar[str | None] = None
    #: metric plotted per instance in the report figure (defaults to the first numeric metric)
    plot_metric: ClassVar[str | None] = None
    #: the y-axis scale of a figure panel by metric (or ``*_curve``) name: "linear", "log" or "symlog"
    #: (default: chosen from the values, see the module docstring), e.g. ``{"ratio": "linear"}`` where a
    #: 0.95 vs 1 gap must stay visible
    plot_scales: ClassVar[dict[str, str]] = {}
    #: Hypotheses that define the theorem's own random family (not the claim's conditions on arbitrary
    #: data): an instance vacuous only through these is drawn again (a new seed, up to ``max_redraws``
    #: times; the ``redraws`` metric reports it), since PASS needs at most MAX_VACUOUS_SHARE of the
    #: instances vacuous (checks.harness). Never used on --data.
    redraw_on: ClassVar[tuple[str, ...]] = ()
    max_redraws: ClassVar[int] = 4
    #: Numeric components the check relies on, by name from ``checks.power.sabotage.COMPONENTS`` ("gd",
    #: "kq-gd", "regpath", "prompt-gd", "prompt-path", "seq-gd", "ntp-gd", "vp-path", "gradient", "softmax",
    #: "causal-mask", "optimal-token", "svm-fro", "svm-nuc", "certificate", "rank"). ``attnsvm power`` runs
    #: the theorem under every sabotage of these components and expects each to change its verdict (README,
    #: "Power analysis").
    #: Empty: nothing numeric to sabotage (e.g. a symbolic check).
    depends_on: ClassVar[tuple[str, ...]] = ()
    #: Predictions (names of ``check_*`` methods) that certify the numerics the hypotheses are computed from,
    #: e.g. ``("is_gradient_descent",)`` where a hypothesis reads GD's output (its final token selection).
    #: They are evaluated on every instance, also when a hypothesis is unmet: if one fails, the instance is
    #: refuted (a broken optimiser is refuted, not left vacuous by hypotheses computed from its output).
    integrity: ClassVar[tuple[str, ...]] = ()
    #: Sabotages (by name, ``checks.power.sabotage.CATALOGUE``) the claim is invariant to, each with the
    #: mathematical reason, e.g. ``{"transposed-gradient": "the Frobenius norm is transpose-invariant"}``: the
    #: power matrix shows such a cell as "invariant (reason)", not as a survivor, and does not run it. A
    #: declaration is a claim about the mathematics, never a way to hide a blind spot of the check.
    invariant_to: ClassVar[dict[str, str]] = {}
    #: Draw exactly the instances of the theorem with this id (its instance seeds: crc32 of that id instead of
    #: this one's, checks.harness.instance_seed), e.g. a control that must refute the very instances on which
    #: its theorem holds. Its ``instance`` method must draw the same family (a control subclassing its theorem
    #: does). None: this theorem's own seeds (renaming its id changes every instance).
    same_instances_as: ClassVar[str | None] = None
    #: the decision rules, for the report (see the module docstring); empty: "criteria not declared"
    criteria: ClassVar[tuple[Criterion, ...]] = ()
    #: the paper's numbering where known, e.g. "TLTO Thm 2" (shown beside ``reference``)
    theorem_number: ClassVar[str | None] = None

    # -- instance family --------------------------------------------------------------------
    def instance(self, rng: np.random.Generator, ctx: Context) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define instance(rng, ctx)")

    def predicted(self, name: str, obj: Any, kind: str = "direction",
                  span: Sequence[Any] | Callable[[], Sequence[Any]] | None = None) -> Any:
        """The predicted object a check compares the numerics with (a direction, a bound, a finite part),
        through the one seam :func:`checks.power.resolution.predicted`: unchanged in every normal run,
        perturbed by a relative ε under ``attnsvm power --resolution``, which measures the smallest error the
        check catches. ``kind``: "direction", "upper" / "lower" (a bound), "point", "value" (a scalar the
        numerics must equal); ``span``: the subspace the object lives in (default: the whole space), or a
        function building it, which only a perturbation calls."""
        from .power.resolution import predicted

        return predicted(self.id, name, obj, kind, span)

    def prepare(self, instances: Sequence[Any], ctxs: Sequence[Context]) -> list[Any]:
        """Expensive shared work for a batch of instances (e.g. one batched GD run). Default: none."""
        return [None] * len(instances)

    def sizes(self, inst: Any) -> dict[str, int]:
        """The instance's sizes, recorded in its metrics (the report shows their ranges). Default: n, T, d
        of the AttentionData in the instance (:func:`find_data`, or ``inst.case.data``), else of a token or
        key array ``inst["X"]`` / ``inst["keys"]`` (a typed instance: ``inst.X`` / ``inst.keys``) of shape
        (n, T, d); none when it carries none."""
        data = find_data(inst)
        if data is None:
            data = getattr(getattr(inst, "case", None), "data", None)
        if data is not None and all(hasattr(data, k) for k in ("n", "T", "d")):
            return {"n": int(data.n), "T": int(data.T), "d": int(data.d)}
        for key in ("X", "keys"):
            arr = inst.get(key) if isinstance(inst, dict) else getattr(inst, key, None)
            if isinstance(arr, np.ndarray) and arr.ndim == 3:
                n, T, d = arr.shape
                return {"n": int(n), "T": int(T), "d": int(d)}
        return {}

    def applies_to(self, data: Any) -> str | None:
        """Why this theorem cannot run on given data (None when it can): a dataset of another format than
        ``data_kind``, else :meth:`not_applicable`. The harness asks this."""
        return self._other_format(data) or self.not_applicable(data)

    def _other_format(self, data: Any) -> str | None:
        """The one format rule: the given data are not of ``data_kind``."""
        kind = getattr(data, "data_kind", "attention")
        if kind == self.data_kind:
            return None
        fmt = {"attention": "an attention dataset (X, Y, ...)", "ntp": "an NTP dataset (E, tokens, labels)"}
        return f"needs {fmt.get(self.data_kind, self.data_kind)}; the given data are {fmt.get(kind, kind)}"

    def not_applicable(self, data: Any) -> str | None:
        """Why this theorem cannot run on given data (None when it can); the default: a theorem that draws its
        own instances does not apply, one that accepts data applies to data of its ``data_kind``."""
        if not self.accepts_data:
            return ("this theorem draws its own instances (a constructed family), so it does not apply to "
                    "given data")
        return self._other_format(data)

    # -- introspection ------------------------------------------------------------------------
    @classmethod
    def _methods(cls, prefix: str) -> list[tuple[str, Callable]]:
        out: list[tuple[str, Callable]] = []
        for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
            if name.startswith(prefix):
                out.append((name[len(prefix):], fn))
        # definition order, not alphabetical: follow the source
        order = {name: i for i, name in enumerate(_attr_order(cls))}
        out.sort(key=lambda p: order.get(prefix + p[0], 10**6))
        return out

    @classmethod
    def hypothesis_names(cls) -> list[str]:
        return [n for n, _ in cls._methods("assume_")]

    @classmethod
    def prediction_names(cls) -> list[str]:
        return [n for n, _ in cls._methods("check_")]

    @classmethod
    def profile(cls, name: str) -> Profile:
        """The theorem's profile ``name``, its inconclusive bound filled in from the default profile."""
        p = cls.profiles.get(name, DEFAULT_PROFILES[name])
        if p.max_inconclusive is None:
            p = replace(p, max_inconclusive=DEFAULT_PROFILES[name].max_inconclusive)
        return p

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {
            "id": cls.id,
            "title": cls.title,
            "reference": cls.reference,
            "expected": cls.expected,
            "control_of": cls.control_of,
            "finding": cls.finding,
            "undecidable": cls.undecidable,
            "finding_seen": {f"{p}/seed {s}": list(ks) for (p, s), ks in cls.finding_seen.items()},
            "finding_by_mechanism": cls.finding_mechanism is not None,
            "depends_on": list(cls.depends_on),
            "invariant_to": dict(cls.invariant_to),
            "integrity": list(cls.integrity),
            "same_instances_as": cls.same_instances_as,
            "theorem_number": cls.theorem_number,
            "criteria": [c.to_json() for c in cls.criteria],
            "resolution": cls.resolution(),
        }

    @classmethod
    def resolution(cls) -> dict[str, Any] | None:
        """The measured resolution of this theorem's predictions (the committed checks/power/resolution.json:
        the smallest relative error ε of its predicted object that the check FAILs, with the ε ladder's
        verdicts, the profile and the seed), or None when never measured."""
        from .power.resolution import measured

        return measured(cls.id)


def _attr_order(cls: type) -> list[str]:
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in vars(klass):
            if name in names:
                names.remove(name)
            names.append(name)
    return names


def _constant_methods(cls: type) -> list[str]:
    """Names of assume_*/check_* methods defined in ``cls`` whose whole body returns a constant
    (``return True``, ``return held()``): they cannot fail, so they check nothing."""
    import textwrap

    out = []
    for name, fn in vars(cls).items():
        if not (name.startswith(("assume_", "check_")) and inspect.isfunction(fn)):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            continue
        node = tree.body[0]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = [
            b
            for b in node.body
            if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))
        ]
        if len(body) == 1 and isinstance(body[0], ast.Return) and _is_constant(body[0].value):
            out.append(name)
    return out


def _is_constant(node: ast.AST | None) -> bool:
    if node is None or isinstance(node, ast.Constant):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("held", "failed", "undecided", "decide")
            and all(isinstance(a, ast.Constant) for a in node.args)
            and all(isinstance(k.value, ast.Constant) for k in node.keywords))


# -- registry ---------------------------------------------------------------------------------
REGISTRY: dict[str, type[Theorem]] = {}


def _depends_on_problems(deps: Any) -> list[str]:
    """What is wrong with a ``depends_on`` declaration (empty when it is a tuple of known components)."""
    from checks.power.sabotage import COMPONENTS

    if not isinstance(deps, tuple) or not all(isinstance(c, str) for c in deps):
        return [f"depends_on must be a tuple of component names, got {deps!r}"]
    unknown = [c for c in deps if c not in COMPONENTS]
    if unknown:
        return [f"depends_on names unknown component(s) {', '.join(map(repr, unknown))}; known: "
                f"{', '.join(COMPONENTS)}"]
    return []


def register(cls: type[Theorem]) -> type[Theorem]:
    """Class decorator adding a theorem (or control) to the catalogue; validates its declaration."""
    if not (isinstance(cls, type) and issubclass(cls, Theorem)):
        raise TypeError("@register expects a subclass of checks.Theorem")
    problems = _declaration_problems(cls)
    if problems:
        raise TypeError(f"theorem {cls.__name__} ({cls.id!r}): " + "; ".join(problems))
    if cls.control_of and "finding" not in vars(cls):
        cls.finding = None  # a control does not inherit its theorem's finding
        cls.finding_seen = {}
        cls.finding_mechanism = None
    problems = _finding_problems(cls)
    if problems:
        raise TypeError(f"theorem {cls.__name__} ({cls.id!r}): " + "; ".join(problems))
    existing = REGISTRY.get(cls.id)
    if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
        raise TypeError(f"duplicate theorem id {cls.id!r}: {existing.__module__}.{existing.__qualname__} and "
                        f"{cls.__module__}.{cls.__qualname__}")
    REGISTRY[cls.id] = cls
    return cls


def _declaration_problems(cls: type[Theorem]) -> list[str]:
    """What is wrong with a theorem's declaration (id, expected, title, predictions, criteria, profiles,
    constant hypotheses/predictions, depends_on)."""
    problems = []
    if not cls.id or not isinstance(cls.id, str):
        problems.append("missing id")
    if cls.expected not in EXPECTED:
        problems.append(f"expected must be PASS or FAIL, got {cls.expected!r}")
    if not cls.title:
        problems.append("missing title")
    if not cls.prediction_names():
        problems.append("no check_* prediction methods")
    missing = set(cls.integrity) - set(cls.prediction_names())
    if missing:
        problems.append(f"integrity names no check_* method: {sorted(missing)}")
    if not (isinstance(cls.criteria, tuple) and all(isinstance(c, Criterion) for c in cls.criteria)):
        problems.append("criteria must be a tuple of checks.Criterion")
    for name in cls.profiles:
        if name not in PROFILES:
            problems.append(f"unknown profile {name!r}")
    problems += [
        f"{name} always returns the same thing: a hypothesis or prediction that cannot fail is not a "
        f"check (a subclass drops an inherited one with `{name} = None`)"
        for name in _constant_methods(cls)
    ]
    problems.extend(_depends_on_problems(cls.depends_on))
    problems.extend(_invariant_problems(cls.invariant_to))
    if not (isinstance(cls.plot_scales, dict)
            and all(v in ("linear", "log", "symlog") for v in cls.plot_scales.values())):
        problems.append(f"plot_scales must map metric names to 'linear', 'log' or 'symlog', got "
                        f"{cls.plot_scales!r}")
    if cls.same_instances_as is not None and not (isinstance(cls.same_instances_as, str)
                                                  and cls.same_instances_as):
        problems.append(f"same_instances_as must be a theorem id, got {cls.same_instances_as!r}")
    return problems


def _invariant_problems(inv: Any) -> list[str]:
    """What is wrong with an ``invariant_to`` declaration (empty when it maps known sabotages to reasons)."""
    from checks.power.sabotage import CATALOGUE

    if not isinstance(inv, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                                            for k, v in inv.items()):
        return [f"invariant_to must map sabotage names to the reason of the invariance, got {inv!r}"]
    unknown = [k for k in inv if k not in CATALOGUE]
    if unknown:
        return [f"invariant_to names unknown sabotage(s) {', '.join(map(repr, unknown))}; known: "
                f"{', '.join(CATALOGUE)}"]
    return []


def _finding_problems(cls: type[Theorem]) -> list[str]:
    """What is wrong with a theorem's recorded finding (the text and where it was seen go together)."""
    problems = []
    if bool(cls.finding) != bool(cls.finding_seen):
        problems.append("finding and finding_seen go together: a finding names where it was seen "
                        "({(profile, seed): (instance, ...)}), and finding_seen needs the finding's text")
    if cls.finding_mechanism is not None and not cls.finding:
        problems.append("finding_mechanism recognises a documented finding: give the finding's text too")
    if cls.finding_mechanism is not None and not callable(cls.finding_mechanism):
        problems.append("finding_mechanism must be a function of one InstanceResult returning a bool")
    for key, ks in cls.finding_seen.items():
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] in PROFILES and isinstance(key[1], int)
                and isinstance(ks, tuple) and ks and all(isinstance(k, int) for k in ks)):
            problems.append(f"finding_seen entry {key!r}: {ks!r} must be (profile, seed): (instance, ...)")
    return problems
