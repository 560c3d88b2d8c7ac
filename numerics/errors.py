"""The one errors module of attnsvm.

Every message says what was expected, what was got, and (where it helps) what to do.
The CLI turns :class:`InvalidInputError` into a one-line message and exit code 2.
"""

from __future__ import annotations


class AttnSVMError(Exception):
    """Base class of every error attnsvm raises on purpose."""


class InvalidInputError(AttnSVMError, ValueError):
    """User-supplied data or arguments are malformed (shapes, NaN, labels, file format...)."""


class EnvironmentFault(AttnSVMError):
    """A fault of the environment, not of attnsvm or its input: worker processes killed (the OOM killer, a
    segfaulting library) faster than they can be replaced, memory or disk exhausted. The CLI reports it as
    a fault with exit code 1, never as an internal error."""


class InfeasibleError(AttnSVMError):
    """A program that had to be feasible is not. (Att-SVM infeasibility is an *outcome*, not this.)"""


class SolverError(AttnSVMError):
    """A numerical solver failed or returned an answer we could not certify.

    ``status`` carries the solver's own status string so reports can show it.
    """

    def __init__(self, message: str, *, status: str | None = None, solver: str | None = None):
        super().__init__(message)
        self.status = status
        self.solver = solver


class NotConvergedError(AttnSVMError):
    """An iterative method ran out of budget before reaching its tolerance."""
