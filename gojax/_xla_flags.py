"""XLA options gojax sets before JAX starts its CPU backend.

XLA's CPU backend (jaxlib 0.10) hands each convolution to YNNPACK by
default. On a 2-core machine a YNNPACK convolution keeps about one core busy
(a b6c96 forward pass: 1.2x faster on two cores than on one), while Eigen's
convolution, which XLA uses once YNNPACK's is switched off, splits the work
over the intra-op thread pool. Measured with ``bench/net.py`` on the 2-core
CI-class machine: b6c96 on 19x19 at batch 16 goes from 387 to 566
evaluations/s (56% -> 78% of the matmul rate), on 9x9 at batch 256 from 1,260
to 2,500/s. The flag only touches the CPU backend; GPUs and TPUs ignore it.

Opt-in for now: set ``GOJAX_EIGEN_CONVOLUTIONS=1`` (the benchmark scripts
do). In the test suite, a pytest worker that had compiled ~600 tests'
programs aborted inside XLA's compiler on a later compile three runs out of
three with the flag set, never in a fresh process; until that is understood
the default stays XLA's. A user's own ``--xla_cpu_experimental_ynn_fusion_type``
in ``XLA_FLAGS`` is left alone. XLA reads the variable when the backend starts
(the first computation), so setting it at ``import gojax`` works after
``import jax`` too, but not after the first computation.
"""

from __future__ import annotations

import os

EIGEN_CONVOLUTIONS = "--xla_cpu_experimental_ynn_fusion_type=-individual_convolution"


def prefer_eigen_convolutions(environ: dict[str, str] | None = None) -> bool:
    """Add :data:`EIGEN_CONVOLUTIONS` to ``XLA_FLAGS`` if ``GOJAX_EIGEN_CONVOLUTIONS=1`` and
    the user set no YNN fusion option of their own.

    Returns whether the flag was added.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    asked = environ.get("GOJAX_EIGEN_CONVOLUTIONS") == "1"
    if not asked or "xla_cpu_experimental_ynn_fusion_type" in flags:
        return False
    environ["XLA_FLAGS"] = f"{flags} {EIGEN_CONVOLUTIONS}".strip()
    return True
