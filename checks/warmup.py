"""``attnsvm warmup``: pay the one-time costs before any check run does.

* the GD kernels (numerics.kernels): numba compiles each shape (n, T, d, m) once per machine, 3-5 s per
  kernel; ``warmup`` compiles the catalogue's shapes (``numerics.kernels.CATALOGUE_SHAPES``) and every shape
  this machine has used before (the kernel cache's shapes.json), and the mirror-descent kernel of the md
  checks' shapes (``numerics.kernels.MIRROR_SHAPES``), or loads them from the disk cache when they are
  already compiled;
* the catalogue's metadata cache, so that ``attnsvm list`` starts without importing the numerics.

``tox -e checks`` runs it before the catalogue. Running it again is cheap (everything is found in the caches).
"""

from __future__ import annotations

import time


def cmd_warmup(args) -> int:
    from numerics import kernels
    from numerics.gd import warm_kernels

    from .runner import catalogue_metadata

    t0 = time.perf_counter()
    entries = catalogue_metadata(args.plugin)
    print(f"catalogue metadata: {len(entries)} entries ({time.perf_counter() - t0:.1f} s)")
    if not kernels.available():
        print(
            "GD kernels: numba unavailable or ATTNSVM_NO_NUMBA set; GD runs on the torch path (nothing to "
            "compile)"
        )
        return 0
    shapes = sorted({*kernels.CATALOGUE_SHAPES, *kernels.recorded_shapes()})
    print(f"GD kernels: {len(shapes)} shapes, cache {kernels.cache_dir()}")
    runs = warm_kernels(shapes) + warm_kernels(kernels.MIRROR_SHAPES, params=("mirror",))
    for r in runs:
        n, T, d, m = r["shape"]
        print(f"  n={n} T={T} d={d} m={m} {r['param']:6}: {r['seconds']:.2f} s")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0
