"""Power analysis: which checks catch which numeric bug.

:mod:`checks.power.sabotage` breaks one numeric component at a time (a no-op optimiser, a wrong SVM, a
softmax without its normaliser, ...; the GD ones in :mod:`checks.power.sabotage_gd`, the others in
:mod:`checks.power.patches`), and :mod:`checks.power.matrix` runs ``attnsvm power``, the matrix theorem x
sabotage. The numerics themselves (numerics/) know nothing of it."""
