"""AlphaGo's fast rollout policy: a linear softmax over local patterns.

AlphaGo (Silver et al. 2016) played its rollouts with a policy thousands of
times cheaper than a network: a linear softmax over small, hand-chosen
features of each candidate move, fitted to expert moves (24% of them
predicted on 19x19, against 57% for the SL network). It valued leaves far
better than uniform random play. Ours keeps the idea and its main features,
with sizes chosen for a table lookup in JAX:

* **non-response pattern**: the 3x3 neighbourhood of the point. Each of the 8
  neighbours is one of 6 states seen from the mover's side -- empty, off the
  board, own stone whose chain has 1 liberty, own stone with 2 or more,
  opponent stone with 1, opponent stone with 2 or more -- so captures,
  escapes from atari and ataris are visible.
  Patterns equal under the 8 symmetries of the square share one weight (the
  smallest of the 8 codes indexes a table of ``6**8`` weights);
* **response pattern**: a second weight of the same pattern, added when the
  point touches the opponent's last move (8-connected): answering a move
  locally is what most moves in Go do;
* **distance to the last two moves**: one weight per class of offset
  ``(|dr|, |dc|)`` -- (0,1), (1,1), (0,2), (1,2), (2,2), farther -- from the
  opponent's last move and one from the mover's own last move (AlphaGo's
  "neighbour" and "response" features, folded by symmetry).

The move set is that of random rollouts (``gojax.uct.rollout_moves``:
legal, no filling of one's own single-point eyes, pass only when nothing
else is left), so the learned policy changes only which of those moves is
likely. Weights are plain arrays (:class:`RolloutWeights`, a pytree), the
same for every board size; ``gojax train-rollout`` fits them to game
records and writes them with :func:`save`, and :func:`load` reads them back.
"""

from __future__ import annotations

import functools
import io
import os
import zipfile
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gojax._board import _OFF_BOARD, EMPTY, GoState
from gojax.atomic import write_atomic

__all__ = [
    "NUM_PATTERNS",
    "RolloutWeights",
    "features",
    "load",
    "logits",
    "logits_from_features",
    "metadata",
    "pattern_codes",
    "save",
    "zero_weights",
]

STATES = 6  # per neighbour: empty, off board, own 1 liberty, own 2+, opponent 1, opponent 2+
NUM_PATTERNS = STATES**8
NUM_OFFSETS = 6  # offset classes (0,1) (1,1) (0,2) (1,2) (2,2) and "farther or none"
_FAR = NUM_OFFSETS - 1
FORMAT = "gojax-rollout-policy-1"

# The 8 neighbours clockwise from the upper left: a quarter turn moves each one two
# places along the ring, a mirror image reverses it.
_RING = ((-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1))
_SYMMETRIES = np.array(
    [[(i + 2 * turn) % 8 for i in range(8)] for turn in range(4)]
    + [[(2 - i + 2 * turn) % 8 for i in range(8)] for turn in range(4)],
    np.int32,
)  # [8, 8]: digit i of the transformed pattern is digit _SYMMETRIES[s, i] of the pattern
_OFFSET_CLASS = {(0, 1): 0, (1, 1): 1, (0, 2): 2, (1, 2): 3, (2, 2): 4}


class RolloutWeights(NamedTuple):
    """The policy's parameters (float32): ``pattern [NUM_PATTERNS]``, ``response
    [NUM_PATTERNS]``, ``last [NUM_OFFSETS]`` (offset from the opponent's last move),
    ``own_last [NUM_OFFSETS]`` (from the mover's own last move)."""

    pattern: jax.Array
    response: jax.Array
    last: jax.Array
    own_last: jax.Array


def zero_weights() -> RolloutWeights:
    """All weights zero: the uniform policy over the rollout's moves."""
    return RolloutWeights(
        pattern=jnp.zeros(NUM_PATTERNS, jnp.float32),
        response=jnp.zeros(NUM_PATTERNS, jnp.float32),
        last=jnp.zeros(NUM_OFFSETS, jnp.float32),
        own_last=jnp.zeros(NUM_OFFSETS, jnp.float32),
    )


@functools.cache
def _ring_table(size: int) -> np.ndarray:
    """``[P, 8]`` int32: each point's 8 neighbours in ring order; ``P`` off the board."""
    p = size * size
    table = np.full((p, 8), p, np.int32)
    for point in range(p):
        row, col = divmod(point, size)
        for i, (dr, dc) in enumerate(_RING):
            r, c = row + dr, col + dc
            if 0 <= r < size and 0 <= c < size:
                table[point, i] = r * size + c
    return table


@functools.cache
def _offset_table(size: int) -> np.ndarray:
    """``[P + 1, P]`` int8: the offset class of each point from move ``q`` (row ``P``: none)."""
    p = size * size
    rows, cols = np.divmod(np.arange(p), size)
    dr = np.abs(rows[:, None] - rows[None, :])
    dc = np.abs(cols[:, None] - cols[None, :])
    near, far = np.minimum(dr, dc), np.maximum(dr, dc)
    table = np.full((p + 1, p), _FAR, np.int8)
    for (a, b), cls in _OFFSET_CLASS.items():
        table[:p][(near == a) & (far == b)] = cls
    return table


def pattern_codes(state: GoState) -> jax.Array:
    """``[P]`` int32: the canonical 3x3 pattern code of every point, seen by the mover.

    The code of a pattern is ``sum(digit_i * 6**i)`` over its ring of 8
    neighbours; the canonical code is the smallest over the 8 symmetries.
    Defined for stones too (only empty points are ever played).
    """
    ring = _ring_table(state.size)
    board = jnp.append(state.board, jnp.int8(_OFF_BOARD))[ring]  # [P, 8]
    libs = jnp.append(state.liberties, jnp.int16(0))[ring]
    own = board == state.to_play
    atari = libs == 1
    digit = jnp.where(
        board == EMPTY,
        0,
        jnp.where(board == _OFF_BOARD, 1, jnp.where(own, 2, 4) + jnp.where(atari, 0, 1)),
    ).astype(jnp.int32)
    powers = jnp.asarray(STATES ** np.arange(8), jnp.int32)
    codes = jnp.stack([digit[:, perm] @ powers for perm in _SYMMETRIES], axis=-1)  # [P, 8]
    return jnp.min(codes, axis=-1)


def _offsets_from(state: GoState, back: int) -> jax.Array:
    """``[P]`` int8: offset class of each point from the move ``back`` moves ago."""
    p = state.board.shape[-1]
    move = state.recent_moves[back].astype(jnp.int32)
    row = jnp.where((move < 0) | (move >= p), p, move)  # none or a pass: every point "far"
    return jnp.asarray(_offset_table(state.size))[row]


def features(state: GoState) -> dict[str, jax.Array]:
    """What the policy reads of one position: ``pattern [P]`` int32 (canonical codes),
    ``last [P]`` and ``own_last [P]`` int8 (offset classes from the last two moves)."""
    return {
        "pattern": pattern_codes(state),
        "last": _offsets_from(state, 0),
        "own_last": _offsets_from(state, 1),
    }


def logits_from_features(weights: RolloutWeights, feats: dict[str, jax.Array]) -> jax.Array:
    """``[..., P]`` float32 logits of every point from :func:`features` (any leading axes)."""
    last = feats["last"].astype(jnp.int32)
    pattern = feats["pattern"]
    touching = last <= _OFFSET_CLASS[(1, 1)]  # 8-connected to the opponent's last move
    return (
        weights.pattern[pattern]
        + jnp.where(touching, weights.response[pattern], 0.0)
        + weights.last[last]
        + weights.own_last[feats["own_last"].astype(jnp.int32)]
    )


def logits(weights: RolloutWeights, state: GoState) -> jax.Array:
    """``[P]`` float32: the policy's logit of every point in one position (mask them with
    ``gojax.uct.rollout_moves``)."""
    return logits_from_features(weights, features(state))


# ----------------------------------------------------------------------------
# The weights on disk: one .npz, written atomically.


def save(path: str | os.PathLike, weights: RolloutWeights, **metadata: str) -> None:
    """Write ``weights`` (and string ``metadata``, e.g. what they were fitted on) atomically."""
    buffer = io.BytesIO()
    arrays = {name: np.asarray(value, np.float32) for name, value in weights._asdict().items()}
    extra = {f"meta_{k}": np.asarray(str(v)) for k, v in metadata.items()}
    np.savez_compressed(buffer, format=np.asarray(FORMAT), **arrays, **extra)
    write_atomic(path, buffer.getvalue())


def load(path: str | os.PathLike) -> RolloutWeights:
    """Read weights written by :func:`save`; ValueError naming the file and what is wrong."""
    try:
        with np.load(path, allow_pickle=False) as data:
            found = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise ValueError(f"{path}: no such rollout policy file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: not a rollout policy file ({error})") from None
    if str(found.get("format", "")) != FORMAT:
        raise ValueError(f"{path}: not a rollout policy file (format {FORMAT!r} expected)")
    shapes = {
        "pattern": (NUM_PATTERNS,),
        "response": (NUM_PATTERNS,),
        "last": (NUM_OFFSETS,),
        "own_last": (NUM_OFFSETS,),
    }
    arrays = {}
    for name, shape in shapes.items():
        if name not in found:
            raise ValueError(f"{path}: rollout policy file has no {name!r} weights")
        value = found[name]
        if value.shape != shape or not np.issubdtype(value.dtype, np.floating):
            raise ValueError(
                f"{path}: {name!r} weights are {value.dtype}{list(value.shape)}, "
                f"not float{list(shape)}"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{path}: {name!r} weights are not all finite")
        arrays[name] = jnp.asarray(value, jnp.float32)
    return RolloutWeights(**arrays)


def metadata(path: str | os.PathLike) -> dict[str, str]:
    """The string metadata :func:`save` wrote beside the weights."""
    with np.load(path, allow_pickle=False) as data:
        return {k[5:]: str(data[k]) for k in data.files if k.startswith("meta_")}
