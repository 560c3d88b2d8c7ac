"""Experiments beyond the theorem checks: the sweep runner (:mod:`.sweep`, seeds per trial, process pool or
Dask), ``attnsvm assumptions`` (:mod:`.assumptions`, hypothesis rates over a grid) and ``attnsvm reproduce``
(:mod:`.reproduce`, one module per reproduced figure of the paper: :mod:`.gd_paths`,
:mod:`.local_convergence`, :mod:`.svm_rank`, :mod:`.global_vs_d`, :mod:`.multi_token`; shared pieces in
:mod:`.common`)."""
