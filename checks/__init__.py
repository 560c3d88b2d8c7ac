"""attnsvm's harness: theorem catalogue, instance strategies, verdicts, reports, CLI.

The public names below load :mod:`checks.theorem` (and numpy) on first use (PEP 562), so that the command
line starts without the numerics: ``attnsvm --help`` and ``attnsvm list`` import neither numpy nor torch.
"""

from typing import TYPE_CHECKING

__all__ = [
    "DEFAULT_PROFILES", "REGISTRY", "WITHDRAWN", "Context", "Criterion", "Outcome", "Profile", "Theorem",
    "decide", "failed", "held", "register", "undecided",
]

if TYPE_CHECKING:
    from .theorem import (
        DEFAULT_PROFILES,
        REGISTRY,
        WITHDRAWN,
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


def __getattr__(name: str):
    if name in __all__:
        from . import theorem

        value = getattr(theorem, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'checks' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *__all__])

