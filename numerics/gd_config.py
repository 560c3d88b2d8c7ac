"""GD settings as one frozen value, and the named preset for the authors' protocol (THEORY.md §5-6).

:data:`AUTHORS` is the protocol of the umich-sota/TF-as-SVM notebooks as this project reproduces it:
normalised GD, step 0.1, 2000 steps; for (K, Q) the loss gets eps·(‖K‖_F² + ‖Q‖_F²) with eps = float64
machine epsilon (their W loss has no such term), and K, Q (and W) start from nn.Linear's default
initialisation, entries uniform on ±1/√d (:func:`uniform_init`). Every reproduction and theorem that runs
"the authors' protocol" takes its numbers from here.

Examples
--------
>>> AUTHORS.lr, AUTHORS.steps, AUTHORS.normalized
(0.1, 2000, True)
>>> AUTHORS.run_kwargs("KQ")["weight_decay"] == AUTHORS_WD > 0 == AUTHORS.run_kwargs("W")["weight_decay"]
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: The authors' weight decay for (K, Q): torch.finfo(torch.double).eps.
AUTHORS_WD = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class GDConfig:
    """The settings of :func:`numerics.gd.run_gd` that a protocol fixes (the rest stays per call).

    ``kq_weight_decay`` is passed as ``weight_decay`` for param="KQ" only (the authors' W loss has none).
    """

    lr: float
    steps: int
    normalized: bool = True
    kq_weight_decay: float = 0.0

    def run_kwargs(self, param: str = "W") -> dict[str, Any]:
        """Keyword arguments of run_gd for this protocol and ``param``."""
        return {"param": param, "steps": self.steps, "lr": self.lr, "normalized": self.normalized,
                "weight_decay": self.kq_weight_decay if param == "KQ" else 0.0}


#: The authors' protocol: normalised GD, step 0.1, 2000 steps, eps weight decay on (K, Q).
AUTHORS = GDConfig(lr=0.1, steps=2000, normalized=True, kq_weight_decay=AUTHORS_WD)


def uniform_init(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> np.ndarray:
    """nn.Linear(d, ·)'s default weight initialisation, the authors' start: uniform on ±1/√d (fan_in = d)."""
    b = 1.0 / np.sqrt(d)
    return rng.uniform(-b, b, size=shape)
