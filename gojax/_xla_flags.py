"""XLA options gojax sets before JAX starts its CPU backend.

XLA's CPU backend (jaxlib 0.10) hands each convolution to YNNPACK by
default. On a 2-core machine a YNNPACK convolution keeps about one core busy
(a b6c96 forward pass: 1.2x faster on two cores than on one), while Eigen's
convolution, which XLA uses once YNNPACK's is switched off, splits the work
over the intra-op thread pool. Measured with ``bench/net.py`` on the 2-core
CI-class machine: b6c96 on 19x19 at batch 16 goes from 387 to 566
evaluations/s (56% -> 78% of the matmul rate), on 9x9 at batch 256 from 1,260
to 2,500/s; ``bench/selfplay.py``: self-play 2,509 -> 3,242 moves/s. The flag
only touches the CPU backend; GPUs and TPUs ignore it.

On by default when gojax is imported; ``GOJAX_EIGEN_CONVOLUTIONS=0`` turns it
off. (For a while it was opt-in: full test-suite runs with it lost a pytest
worker to an abort inside XLA's compiler. The cause was not the flag: every
compiled XLA CPU program holds ~20 memory mappings while a cache keeps it,
and a worker that compiled half the suite's programs reached Linux's limit of
65,530 (``vm.max_map_count``) with or without the flag; ``tests/conftest.py``
now releases compiled programs between test modules.)

A user's own ``--xla_cpu_experimental_ynn_fusion_type`` in ``XLA_FLAGS`` is left
alone. XLA reads the variable once, when the backend starts (the first
computation), so setting it works after ``import jax`` too, but not later.
"""

from __future__ import annotations

import os

EIGEN_CONVOLUTIONS = "--xla_cpu_experimental_ynn_fusion_type=-individual_convolution"


def prefer_eigen_convolutions(environ: dict[str, str] | None = None) -> bool:
    """Add :data:`EIGEN_CONVOLUTIONS` to ``XLA_FLAGS`` unless ``GOJAX_EIGEN_CONVOLUTIONS=0``
    or the user set a YNN fusion option of their own there. Returns whether it was added.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    refused = environ.get("GOJAX_EIGEN_CONVOLUTIONS") == "0"
    if refused or "xla_cpu_experimental_ynn_fusion_type" in flags:
        return False
    environ["XLA_FLAGS"] = f"{flags} {EIGEN_CONVOLUTIONS}".strip()
    return True


FAST_CPU_COMPILES = "--xla_backend_optimization_level=0"


def fast_cpu_compiles(environ: dict[str, str] | None = None) -> bool:
    """Add :data:`FAST_CPU_COMPILES` (XLA's cheapest CPU compilation) to ``XLA_FLAGS``
    unless the user chose a level there. Returns whether it was added.

    For runs that compile far more than they compute: the test suite (about a quarter
    less time; most of it is compilation of programs run once) and the benchmarks'
    smoke runs, whose figures check the pipeline, not the speed. Level 0 computes the
    same functions, rounded differently, and its code runs slower: never for training
    or play. Like the other flags it must be set before the backend starts.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" in flags:
        return False
    environ["XLA_FLAGS"] = f"{flags} {FAST_CPU_COMPILES}".strip()
    return True
