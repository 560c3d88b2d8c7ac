"""attnsvm's harness: theorem catalogue, instance strategies, verdicts, reports, CLI."""

from .theorem import (
    DEFAULT_PROFILES,
    REGISTRY,
    Context,
    Criterion,
    Outcome,
    Profile,
    Theorem,
    decide,
    failed,
    held,
    register,
    undecided,
)

__all__ = [
    "DEFAULT_PROFILES", "REGISTRY", "Context", "Criterion", "Outcome", "Profile", "Theorem",
    "decide", "failed", "held", "register", "undecided",
]

# Power analysis (README, "Power analysis"): ATTNSVM_SABOTAGE=name installs a sabotaged component for
# the whole process (and, through the environment, its subprocesses). Unset in every normal run.
if __import__("os").environ.get("ATTNSVM_SABOTAGE"):
    from numerics.sabotage import install_from_env as _install_sabotage

    _install_sabotage()

# Old import paths of modules that moved into subpackages (issue 13): see checks/_moved.py.
from . import _moved  # noqa: E402,F401
