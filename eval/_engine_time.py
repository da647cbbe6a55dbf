"""Time for the GTP engine (:mod:`eval.engine`): time systems, clocks, a move's share.

:class:`TimeSettings` covers GTP's ``time_settings`` (absolute, Canadian, no limit),
KGS's ``kgs-time_settings`` (adds Japanese byo-yomi) and KataGo's
``kata-time_settings`` (adds Fischer increments); a :class:`Clock` is one player's time
left, as the controller tells it or as counted; :func:`allocate_time` gives each move a
share of what is left and never more than what is left minus a safety margin, so the
engine does not lose on time while the controller's clock is honest; :func:`move_delay`
is the wait KataGo's ``delayMoveScale`` adds before a move is answered. Apart from the
engine because it is arithmetic on seconds: no board, no player.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

TimeKind = Literal["none", "absolute", "canadian", "byoyomi", "fischer"]


@dataclasses.dataclass(frozen=True)
class TimeSettings:
    """A time system (seconds).

    * ``none``: no limit;
    * ``absolute``: ``main_time`` for the whole game;
    * ``canadian``: after main time, ``period_time`` for every ``period_stones`` moves;
    * ``byoyomi`` (Japanese): after main time, ``periods`` periods of
      ``period_time``; a move made within a period does not use it up;
    * ``fischer``: ``main_time``, and ``increment`` added after every move, the
      clock then cut to ``main_limit``; no move may take more than
      ``max_per_move`` (KataGo's ``fischer`` and ``fischer-capped``).
    """

    kind: TimeKind = "none"
    main_time: float = 0.0
    period_time: float = 0.0
    period_stones: int = 0  # canadian
    periods: int = 0  # byoyomi
    increment: float = 0.0  # fischer
    main_limit: float = math.inf  # fischer
    max_per_move: float = math.inf  # fischer

    @classmethod
    def from_gtp(cls, main_time: float, byo_time: float, byo_stones: int) -> TimeSettings:
        """GTP ``time_settings``: absolute when ``byo_time`` is 0; no limit when
        ``byo_stones`` is 0 with ``byo_time`` > 0; Canadian otherwise."""
        if byo_time <= 0:
            return cls("absolute", main_time=main_time)
        if byo_stones <= 0:
            return cls("none")
        return cls("canadian", main_time, byo_time, period_stones=byo_stones)


@dataclasses.dataclass
class Clock:
    """One player's time left, as the controller last told it (or as we counted)."""

    main_left: float = math.inf
    in_overtime: bool = False
    period_left: float = 0.0  # time left in the current Canadian block or byo-yomi period
    stones_left: int = 0  # Canadian: moves still due in the current block
    periods_left: int = 0  # byo-yomi: periods left, the current one included

    @classmethod
    def start(cls, settings: TimeSettings) -> Clock:
        if settings.kind == "none":
            return cls()
        clock = cls(main_left=settings.main_time)
        if settings.kind != "absolute" and settings.main_time <= 0:
            clock.enter_overtime(settings)
        return clock

    def enter_overtime(self, settings: TimeSettings) -> None:
        self.main_left = 0.0
        self.in_overtime = True
        self.period_left = settings.period_time
        self.stones_left = settings.period_stones
        self.periods_left = settings.periods

    def told(self, settings: TimeSettings, seconds: float, stones: int) -> None:
        """GTP ``time_left``: ``stones`` 0 means main time (or the whole game when absolute).

        Under Japanese byo-yomi KGS sends the periods left in place of stones.
        """
        if settings.kind == "none":
            return
        if stones <= 0 or settings.kind in ("absolute", "fischer"):
            self.main_left, self.in_overtime = max(seconds, 0.0), False
            return
        self.main_left, self.in_overtime = 0.0, True
        self.period_left = max(seconds, 0.0)
        if settings.kind == "byoyomi":
            self.periods_left = stones
        else:
            self.stones_left = stones

    def spend(self, settings: TimeSettings, seconds: float) -> None:
        """Count ``seconds`` spent on one move (for controllers that never send time_left)."""
        if settings.kind == "none":
            return
        if settings.kind == "fischer":
            left = max(self.main_left - seconds, 0.0) + settings.increment
            self.main_left = min(left, settings.main_limit)
            return
        if not self.in_overtime:
            self.main_left -= seconds
            if self.main_left >= 0 or settings.kind == "absolute":
                self.main_left = max(self.main_left, 0.0)
                return
            seconds = -self.main_left
            self.enter_overtime(settings)
        if settings.kind == "canadian":
            self.period_left -= seconds
            self.stones_left -= 1
            if self.stones_left <= 0:  # block done: a fresh one
                self.period_left = settings.period_time
                self.stones_left = settings.period_stones
        else:
            while seconds > self.period_left and self.periods_left > 1:
                seconds -= self.period_left
                self.periods_left -= 1
                self.period_left = settings.period_time
            self.period_left = settings.period_time  # a move within a period resets it


def expected_moves_left(size: int, move_number: int) -> float:
    """How many more moves the player to move should budget for (at least 5).

    A game lasts about ``0.7 * size^2 + 10`` plies on any board (19x19 ≈ 260);
    late in the game we still reserve for a fifth of the board's points.
    """
    points = size * size
    plies = max(0.7 * points + 10 - move_number, 0.2 * points)
    return max(plies / 2, 5.0)


def allocate_time(
    settings: TimeSettings,
    clock: Clock,
    *,
    moves_left: float,
    lag: float = 1.0,
    safety: float = 0.1,
) -> float | None:
    """Seconds to think about the next move, or ``None`` without a time limit.

    The hard limit for one move is what the clock allows before the player
    loses (main time plus what overtime may add for this one move); the
    answer is a share of the time (main time spread over ``moves_left``
    moves, plus most of a period in overtime) and never more than the hard
    limit minus ``lag`` (the controller's and network's delays) and a
    ``safety`` fraction of it. It is 0 when nothing may be spent.
    """
    if settings.kind == "none":
        return None
    if settings.kind == "absolute":
        limit = clock.main_left
        share = clock.main_left / moves_left
    elif settings.kind == "fischer":
        # The increment comes back after every move: spend it, and a share of the rest.
        limit = min(clock.main_left, settings.max_per_move)
        share = clock.main_left / moves_left + settings.increment
    elif not clock.in_overtime:
        if settings.kind == "canadian":
            per_stone = settings.period_time / max(settings.period_stones, 1)
        else:
            per_stone = settings.period_time if settings.periods > 0 else 0.0
        # Overtime starts within the move: only the first stone's share may be counted on.
        limit = clock.main_left + per_stone
        share = clock.main_left / moves_left + 0.5 * per_stone
    elif settings.kind == "canadian":
        limit = clock.period_left
        share = clock.period_left / max(clock.stones_left, 1)
    else:  # byo-yomi: the period comes back after every move made within it
        limit = clock.period_left if clock.periods_left > 0 else 0.0
        share = limit
    if not math.isfinite(limit):
        return None
    usable = limit * (1.0 - safety) - lag
    return float(max(0.0, min(share, usable)))


# KataGo's delayMoveMax default: no cap worth the name.
DELAY_MOVE_MAX = 1e6


def move_delay(prior: float, scale: float, maximum: float, rng: np.random.Generator) -> float:
    """Seconds to wait before answering a ``genmove``: KataGo's ``delayMoveScale`` and
    ``delayMoveMax``, which make a bot move at a human's pace. Gamma(2)-distributed with
    mean ``0.5 * scale / (prior + 0.1)`` (an obvious move, of high ``prior``, comes
    quickly; a surprising one slowly), at most ``maximum``, at least 0.1 ms; 0 when
    ``scale`` or ``maximum`` is 0 (KataGo's default scale: no delay)."""
    if scale <= 0 or maximum <= 0:
        return 0.0
    mean = 0.5 * scale / (max(prior, 0.0) + 0.10)
    return float(min(max(rng.gamma(2.0) * mean / 2.0, 1e-4), maximum))
