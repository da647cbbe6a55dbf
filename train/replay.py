"""A replay buffer: the most recent ``capacity`` self-play positions, on the host.

Positions live in fixed-size numpy ring buffers (one per field); :meth:`add`
appends the valid positions of finished games from
:class:`train.selfplay.Trajectories` and overwrites the oldest ones when
full (AlphaGo Zero trained on the last 500,000 games' positions). A game's
positions are stored next to each other, so a game is evicted from its first
move on.

:meth:`ReplayBuffer.sample` draws a uniform batch and by default applies a
random board symmetry per sample (one of ``gojax.NUM_SYMMETRIES``) to the
input planes, the policy and the ownership together (:func:`augment`).
``one_per_game=True`` draws distinct games and one random position from each,
AlphaGo's remedy for a value net that memorises whole games from their
correlated positions.

Each sample also carries the policy target of the position after it, the
opponent's turn (KataGo's auxiliary opponent-reply target). It is read at
sampling time from the next slot, which holds the game's next move whenever
the sampled position is not its game's last stored one: a game's positions
are stored in order and evicted from the first on, so a stored position's
successor is never gone before it.

``td_value`` and ``td_score`` (KataGo's temporal-difference targets, see
``train.selfplay.td_targets``) are stored per position; games that carry none
(SGF games, buffers saved before them) get the final result at every horizon,
the limit of an infinitely long horizon.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import gojax

__all__ = ["ReplayBuffer", "augment"]

# Per-position fields besides the inputs, with their storage dtypes.
_FIELDS = {
    "policy": np.float32,  # [A]
    "policy_mask": np.bool_,
    "value": np.float32,
    "score": np.float32,
    "score_mask": np.bool_,
    "ownership": np.int8,  # [P]
    "td_value": np.float32,  # [3] horizons long, mid, short
    "td_score": np.float32,  # [3]
    "to_play": np.int8,
    "game": np.int64,  # id: games added before this one (finished or not)
    "move": np.int32,  # index of the position among its game's stored positions
    "game_length": np.int32,  # stored positions of its game
}


def _at_every_horizon(final: np.ndarray) -> np.ndarray:
    """``[N] -> [N, 3]``: a game's result as its temporal-difference targets at every
    horizon (the limit of an infinitely long one), for positions stored without them."""
    return np.repeat(np.asarray(final, np.float32)[:, None], 3, axis=1)


def augment(batch: dict[str, Any], symmetry: jax.Array) -> dict[str, Any]:
    """Apply ``symmetry[i]`` (``[B]`` int, 0..7) to sample ``i`` of a batch (pure, jittable).

    Transforms every input leaf shaped ``[B, N, N, ...]`` (planes, channels last)
    with ``gojax.transform_planes``, ``policy [B, P + 1]`` (and ``opponent_policy``,
    when present) with ``gojax.transform_policy`` and ``ownership [B, P]`` with
    ``gojax.transform_board``; other fields are per position and unchanged.
    """
    size = int(round((batch["policy"].shape[-1] - 1) ** 0.5))

    def planes(x):
        x = jnp.asarray(x)
        if x.ndim >= 3 and x.shape[1:3] == (size, size):
            return jax.vmap(gojax.transform_planes)(x, symmetry)
        return x

    out = dict(batch)
    out["inputs"] = jax.tree.map(planes, batch["inputs"])
    for name in ("policy", "opponent_policy"):
        if name in batch:
            out[name] = jax.vmap(gojax.transform_policy)(jnp.asarray(batch[name]), symmetry)
    out["ownership"] = jax.vmap(gojax.transform_board)(jnp.asarray(batch["ownership"]), symmetry)
    return out


_augment_jit = jax.jit(augment)


def _generator(rng) -> np.random.Generator:
    """A numpy Generator from a Generator, an int seed or a JAX key (consumed)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, int | np.integer):
        return np.random.default_rng(int(rng))
    key = rng
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.random.default_rng(np.asarray(key, np.uint32).ravel().tolist())


class ReplayBuffer:
    """A window of the most recent ``capacity`` positions (host memory, numpy).

    Inputs may be one array per position or a flat ``dict`` of them (as the
    self-play ``encode_fn`` made them); storage arrays are allocated by the
    first :meth:`add`.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, not {capacity}")
        self.capacity = int(capacity)
        self._next = 0  # slot written next
        self._size = 0  # slots filled
        self._games = 0  # games seen by add (ids)
        self._data: dict[str, np.ndarray] | None = None
        self._input_keys: list[str] | None = None  # None: inputs are one array

    def __len__(self) -> int:
        return self._size

    @property
    def games_added(self) -> int:
        """Games passed to :meth:`add` so far (finished or not)."""
        return self._games

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage arrays (allocated for the full capacity)."""
        return 0 if self._data is None else int(sum(a.nbytes for a in self._data.values()))

    # ------------------------------------------------------------------ adding

    def _allocate(self, example: dict[str, np.ndarray]) -> None:
        self._data = {
            name: np.zeros((self.capacity,) + x.shape[1:], x.dtype) for name, x in example.items()
        }

    def _input_arrays(self, inputs: Any) -> dict[str, np.ndarray]:
        if isinstance(inputs, dict):
            keys = sorted(inputs)
            arrays = {f"inputs.{k}": np.asarray(inputs[k]) for k in keys}
        else:
            keys = None
            arrays = {"inputs": np.asarray(inputs)}
        if self._data is not None and keys != self._input_keys:
            raise ValueError(f"inputs keys {keys} differ from the stored {self._input_keys}")
        self._input_keys = keys
        return arrays

    def add(self, traj) -> int:
        """Append the valid positions of the finished games of ``traj``; returns how many.

        ``traj`` is a :class:`train.selfplay.Trajectories` (device or host).
        Positions of unfinished games, and steps after a game's end, are
        skipped. Each game's positions are kept together, in move order.
        """
        traj = jax.device_get(traj)
        keep = np.asarray(traj.valid) & np.asarray(traj.value_mask)  # [T, B]
        num_games = keep.shape[1]
        game_idx, t_idx = np.nonzero(keep.T)  # game-major, moves in order
        if game_idx.size > self.capacity:  # only the newest fit
            game_idx, t_idx = game_idx[-self.capacity :], t_idx[-self.capacity :]
        n = int(game_idx.size)
        if n:
            _, first, counts = np.unique(game_idx, return_index=True, return_counts=True)
            which = np.searchsorted(np.unique(game_idx), game_idx)
            value = np.asarray(traj.value)[t_idx, game_idx]
            score = np.asarray(traj.score)[t_idx, game_idx]
            if hasattr(traj, "td_value"):
                td_value = np.asarray(traj.td_value)[t_idx, game_idx]
                td_score = np.asarray(traj.td_score)[t_idx, game_idx]
            else:  # no search values (an SGF game)
                td_value, td_score = _at_every_horizon(value), _at_every_horizon(score)
            fields = {
                **{k: v[t_idx, game_idx] for k, v in self._input_arrays(traj.inputs).items()},
                "policy": np.asarray(traj.policy)[t_idx, game_idx],
                "policy_mask": np.asarray(traj.policy_mask)[t_idx, game_idx],
                "value": value,
                "score": score,
                "score_mask": np.asarray(traj.score_mask)[t_idx, game_idx],
                "ownership": np.asarray(traj.ownership)[t_idx, game_idx],
                "td_value": td_value,
                "td_score": td_score,
                "to_play": np.asarray(traj.to_play)[t_idx, game_idx],
                "game": self._games + game_idx,
                "move": np.arange(n) - first[which],
                "game_length": counts[which],
            }
            fields = {
                k: np.asarray(v, _FIELDS[k]) if k in _FIELDS else v for k, v in fields.items()
            }
            if self._data is None:
                self._allocate(fields)
            slots = (self._next + np.arange(n)) % self.capacity
            for name, values in fields.items():
                self._data[name][slots] = values
            self._next = int((self._next + n) % self.capacity)
            self._size = min(self._size + n, self.capacity)
        self._games += num_games
        return n

    # ---------------------------------------------------------------- sampling

    def sample(
        self,
        rng,
        batch_size: int,
        *,
        one_per_game: bool = False,
        augment: bool = True,
        inputs_dtype: Any = np.float32,
    ) -> dict[str, Any]:
        """A batch of ``batch_size`` positions, uniformly at random (with replacement).

        Args:
          rng: a ``np.random.Generator``, an int seed or a JAX key.
          batch_size: ``B``.
          one_per_game: draw distinct games uniformly (with replacement only
            when fewer games are stored; repeats then get ``value_mask``
            False) and one random position of each.
          augment: a random symmetry per sample (:func:`augment`); else the
            identity (``symmetry`` 0).
          inputs_dtype: dtype the inputs are cast to (None: as stored).

        Returns:
          A dict of numpy arrays: ``inputs`` (``[B, ...]``, or a dict of them),
          ``policy [B, A]`` float32, ``policy_mask [B]`` bool,
          ``opponent_policy [B, A]`` float32 (the next position's policy target)
          with ``opponent_policy_mask [B]`` bool (False for a game's last
          position and where the next search was a fast one), ``value [B]``
          float32 (z for the player to move), ``value_mask [B]`` bool,
          ``score [B]`` float32, ``score_mask [B]`` bool, ``ownership [B, P]``
          float32 (+1 the player to move), ``td_value [B, 3]`` and ``td_score [B, 3]``
          float32 (horizons long, mid, short), ``to_play [B]`` int8, ``game [B]``
          int64, ``symmetry [B]`` int32.
        """
        if self._size == 0:
            raise ValueError("the replay buffer is empty")
        gen = _generator(rng)
        value_mask = np.ones(batch_size, bool)
        if one_per_game:
            starts = np.flatnonzero(self._data["move"][: self._size] == 0)
            replace = starts.size < batch_size
            games = gen.choice(starts, batch_size, replace=replace)
            offsets = gen.integers(0, self._data["game_length"][games])
            slots = (games + offsets) % self.capacity
            if replace:
                first = np.zeros(batch_size, bool)
                first[np.unique(games, return_index=True)[1]] = True
                value_mask = first
        else:
            slots = gen.integers(0, self._size, batch_size)
        d = self._data
        # The opponent's reply: the game's next stored position (see the module docstring).
        has_next = d["move"][slots] + 1 < d["game_length"][slots]
        following = (slots + 1) % self.capacity
        if self._input_keys is None:
            inputs = d["inputs"][slots]
        else:
            inputs = {k: d[f"inputs.{k}"][slots] for k in self._input_keys}
        batch = {
            "inputs": inputs,
            "policy": d["policy"][slots],
            "policy_mask": d["policy_mask"][slots],
            "opponent_policy": d["policy"][following],
            "opponent_policy_mask": has_next & d["policy_mask"][following],
            "value": d["value"][slots],
            "value_mask": value_mask,
            "score": d["score"][slots],
            "score_mask": d["score_mask"][slots],
            "ownership": d["ownership"][slots].astype(np.float32),
            "td_value": d["td_value"][slots],
            "td_score": d["td_score"][slots],
            "to_play": d["to_play"][slots],
            "game": d["game"][slots],
        }
        if augment:
            symmetry = gen.integers(0, gojax.NUM_SYMMETRIES, batch_size).astype(np.int32)
            moved = {k: batch[k] for k in ("inputs", "policy", "opponent_policy", "ownership")}
            batch.update(jax.tree.map(np.asarray, _augment_jit(moved, symmetry)))
        else:
            symmetry = np.zeros(batch_size, np.int32)
        batch["symmetry"] = symmetry
        if inputs_dtype is not None:
            batch["inputs"] = jax.tree.map(lambda x: x.astype(inputs_dtype), batch["inputs"])
        return batch

    # ------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict[str, np.ndarray]:
        """The contents as plain numpy arrays (filled slots only) for a checkpoint."""
        state = {
            "capacity": np.asarray(self.capacity, np.int64),
            "next": np.asarray(self._next, np.int64),
            "size": np.asarray(self._size, np.int64),
            "games": np.asarray(self._games, np.int64),
        }
        if self._data is not None:
            for name, values in self._data.items():
                state[f"data/{name}"] = values[: self._size].copy()
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore exactly what :meth:`state_dict` returned (the capacity must match)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"capacity {int(state['capacity'])} != this buffer's {self.capacity}")
        self._next = int(state["next"])
        self._size = int(state["size"])
        self._games = int(state["games"])
        stored = {
            k[len("data/") :]: np.asarray(v) for k, v in state.items() if k.startswith("data/")
        }
        if not stored:
            self._data, self._input_keys = None, None
            return
        # Saved before the temporal-difference targets: the final result at every horizon.
        for name, final in (("td_value", "value"), ("td_score", "score")):
            if name not in stored:
                stored[name] = _at_every_horizon(stored[final])
        self._allocate(stored)
        for name, values in stored.items():
            self._data[name][: self._size] = values
        if "inputs" in stored:
            self._input_keys = None
        else:
            self._input_keys = sorted(
                k[len("inputs.") :] for k in stored if k.startswith("inputs.")
            )
