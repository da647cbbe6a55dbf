"""XLA options gojax sets before JAX starts its CPU backend.

XLA's CPU backend (jaxlib 0.10) hands each convolution to YNNPACK by
default. On a 2-core machine a YNNPACK convolution keeps about one core busy
(a b6c96 forward pass: 1.2x faster on two cores than on one), while Eigen's
convolution, which XLA uses once YNNPACK's is switched off, splits the work
over the intra-op thread pool. Measured with ``bench/net.py`` on the 2-core
CI-class machine: b6c96 on 19x19 at batch 16 goes from 387 to 566
evaluations/s (56% -> 78% of the matmul rate), on 9x9 at batch 256 from 1,260
to 2,500/s. The flag only touches the CPU backend; GPUs and TPUs ignore it.

Set ``XLA_FLAGS`` yourself with any ``--xla_cpu_experimental_ynn_fusion_type``
to keep your own choice; ``GOJAX_KEEP_XLA_FLAGS=1`` leaves XLA_FLAGS alone.
XLA reads the variable when the backend starts (the first computation), so
importing gojax after ``import jax`` still works; after the first computation
it no longer has an effect.
"""

from __future__ import annotations

import os

EIGEN_CONVOLUTIONS = "--xla_cpu_experimental_ynn_fusion_type=-individual_convolution"


def prefer_eigen_convolutions(environ: dict[str, str] | None = None) -> bool:
    """Add :data:`EIGEN_CONVOLUTIONS` to ``XLA_FLAGS`` unless the user chose otherwise.

    Returns whether the flag was added.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    if environ.get("GOJAX_KEEP_XLA_FLAGS") or "xla_cpu_experimental_ynn_fusion_type" in flags:
        return False
    environ["XLA_FLAGS"] = f"{flags} {EIGEN_CONVOLUTIONS}".strip()
    return True
