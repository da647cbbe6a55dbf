"""A sweep over the processes of a ``jax.distributed`` job: who plays which cell, and when
they wait for each other.

The same ``gojax sweep`` runs on every process (every host of a TPU pod slice), with
its workdir on a filesystem they share. Cell ``i`` of the grid (in ``cells_of``'s
order) belongs to process ``i % process_count`` (``own_cells``): every process
computes the same split from the config alone, without talking, and a restart with
as many processes gives each the same cells again. A process plays its unfinished
cells on its own devices (a cell is a one-host program) and writes their files
itself. The processes meet twice (``wait_for_all``): once process 0 has checked or
written ``sweep.json`` (the others then check it), and once every process has
played its cells (process 0 then writes the summaries). One process: no waits,
every cell its own.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

# How long a process waits for the others at a barrier: a year, in effect no limit. A
# process that has finished its share waits for the slowest one's, however long that
# takes; one that dies fails the barrier sooner, through the coordination service's
# heartbeats.
BARRIER_TIMEOUT_MS = 365 * 24 * 3600 * 1000

_barriers = itertools.count()  # every process calls the barriers in the same order


def join_job(multihost: bool) -> None:
    """Join a multi-process job before anything touches a JAX backend.

    As ``gojax train``: ``JAX_COORDINATOR_ADDRESS`` (with ``JAX_NUM_PROCESSES`` and
    ``JAX_PROCESS_ID``) names the job; without it, ``multihost`` calls
    ``jax.distributed.initialize()`` with no arguments, which finds the job from
    the environment (TPU pods, SLURM). Neither: a one-process sweep.
    """
    import jax

    from train.learner import initialize_distributed

    if not initialize_distributed() and multihost:
        jax.distributed.initialize()


def this_process() -> tuple[int, int]:
    """``(process_index, process_count)`` of this process in its job (``(0, 1)`` alone)."""
    import jax

    return jax.process_index(), jax.process_count()


def own_cells(grid: Sequence[T], index: int, count: int) -> list[T]:
    """The cells process ``index`` of ``count`` plays: every ``count``-th from its index,
    so that the processes' shares interleave the grid's (and its costs') order."""
    return list(grid[index::count])


def wait_for_all(name: str) -> None:
    """Return once every process of the job has called ``wait_for_all(name)``; at once
    in a one-process run.

    A barrier of the job's coordination service, not a device collective
    (``multihost_utils.sync_global_devices``): that one gives up after 30 s on CPU
    hosts (gloo's rendezvous), and a sweep's processes may wait hours for the slowest.
    """
    import jax

    if jax.process_count() == 1:
        return
    from jax._src import distributed  # the job's client: jax.distributed has no barrier

    key = f"gojax-sweep-{next(_barriers)}-{name}"
    client = distributed.global_state.client
    if client is None:  # processes not joined by jax.distributed.initialize
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(key)
    else:
        client.wait_at_barrier(key, BARRIER_TIMEOUT_MS)


@contextlib.contextmanager
def then_wait_for_all(name: str) -> Iterator[None]:
    """Run the ``with`` block, then ``wait_for_all(name)``, also when the block raises
    (then re-raised after the wait): the others, waiting there, go on with their own
    work instead of waiting for a process that will never come."""
    try:
        yield
    except Exception:
        wait_for_all(name)
        raise
    wait_for_all(name)
