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
