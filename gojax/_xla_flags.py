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

Who gets it:

* ``gojax`` commands (``gtp``, ``analyze``, ``match``, ``train``, ...) turn it on
  by default (:func:`gojax.cli.main`); ``GOJAX_EIGEN_CONVOLUTIONS=0`` turns it off.
* ``import gojax`` from a program of your own leaves XLA's default unless
  ``GOJAX_EIGEN_CONVOLUTIONS=1``. Why the library is more careful: three
  full test-suite runs with the flag on, each with a 19x19 match running on
  the same two cores, lost a pytest worker that had compiled ~600 tests'
  programs to an abort inside XLA's compiler; two later runs with the flag on
  and nothing beside them passed (684 tests). Never seen in a fresh process.

A user's own ``--xla_cpu_experimental_ynn_fusion_type`` in ``XLA_FLAGS`` is left
alone. XLA reads the variable once, when the backend starts (the first
computation), so setting it works after ``import jax`` too, but not later.
"""

from __future__ import annotations

import os

EIGEN_CONVOLUTIONS = "--xla_cpu_experimental_ynn_fusion_type=-individual_convolution"


def prefer_eigen_convolutions(
    environ: dict[str, str] | None = None, *, default: bool = False
) -> bool:
    """Add :data:`EIGEN_CONVOLUTIONS` to ``XLA_FLAGS`` unless the user said otherwise.

    ``GOJAX_EIGEN_CONVOLUTIONS=1`` asks for it and ``=0`` refuses it; unset,
    ``default`` decides. A YNN fusion option of the user's own in ``XLA_FLAGS``
    always wins. Returns whether the flag was added.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    asked = environ.get("GOJAX_EIGEN_CONVOLUTIONS", "1" if default else "0") == "1"
    if not asked or "xla_cpu_experimental_ynn_fusion_type" in flags:
        return False
    environ["XLA_FLAGS"] = f"{flags} {EIGEN_CONVOLUTIONS}".strip()
    return True
