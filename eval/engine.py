"""The host side of a Go engine for one game: position, history, clocks, a player.

:class:`Engine` is what the GTP front end (``eval/gtp.py``) drives. It holds
the board size, komi and rule preset, the current position (a
:class:`gojax.GoState`) with the stack of earlier positions and the list of
moves (for ``undo`` and ``printsgf``), the handicap, the clocks, and a
:class:`eval.players.Player` that chooses moves.

Time: :class:`TimeSettings` covers GTP's ``time_settings`` (absolute,
Canadian, no limit), KGS's ``kgs-time_settings`` (adds Japanese
byo-yomi) and KataGo's ``kata-time_settings`` (adds Fischer increments);
:func:`allocate_time` gives each move a share of what is left and never
more than what is left minus a safety margin, so the engine does not lose
on time while the controller's clock is honest.

Scoring: ``final_status`` judges each chain alive or dead from the network's
ownership, as KataGo's engine does (:func:`dead_chains`), and ``final_score``
removes the dead chains before counting by the rule preset (Tromp-Taylor area,
or under ``japanese`` territory and prisoners with no points in seki, the
removed stones the opponent's prisoners), so that the two agree and a
controller or match referee gets the count a person would agree to. Stones
all count as alive, the position as it stands, when the rules say so (a
``tromp-taylor`` game ended by two passes: that count is the board's) or when
the player has no ownership to judge with (no network, or a net that never
learned ownership).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from eval.engine_replay import SEGMENT, replay_moves
from eval.players import Analysis, Player, _live, root_moves
from gojax import (
    BLACK,
    EMPTY,
    RULE_PRESETS,
    WHITE,
    GoState,
    SetupError,
    get_rules,
    handicap_points,
    legal_moves,
    new_game,
    place_stones,
    play,
    score,
    sgf,
)
from gojax.games import (
    MAX_SIZE,
    MIN_SIZE,
    handicap_bonus,
    neighbor_table,
    result_string,
    rules_of_record,
)
from gojax.katago_features import forget_history

RESIGN = -1  # genmove's answer when the engine resigns
# Moves a game keeps in its superko history, per point of the board (Engine.max_moves).
MOVES_PER_POINT = 4
# KataGo's default resignThreshold, -0.9 on its [-1, 1] win-loss utility, as a win rate.
KATAGO_RESIGN_WINRATE = 0.05
_forget_history = jax.jit(forget_history)  # one program, not an op by op dispatch
TimeKind = Literal["none", "absolute", "canadian", "byoyomi", "fischer"]


class EngineError(ValueError):
    """A request the engine refuses; the message is GTP's error text."""


# ----------------------------------------------------------------------------
# Time control


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


# ----------------------------------------------------------------------------
# The engine


def _may_pass(allowed: np.ndarray | None) -> bool:
    """Whether the root moves ``allowed`` (``players.root_moves``) include a pass."""
    return allowed is None or bool(allowed[-1])


def _colour(player: int) -> str:
    return "B" if player == BLACK else "W"


@dataclasses.dataclass
class Move:
    """A move of the game record: ``colour`` +1/-1, ``action`` (pass = size*size)."""

    colour: int
    action: int


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


class Engine:
    """One game of Go under GTP: position, history, clocks and a player.

    Args:
      player: chooses moves (``eval.players``).
      size, komi, rules: the initial game (komi excludes handicap compensation).
      visits: visit budget handed to ``player.analyze`` (the policy player ignores it;
        the search player's budget is fixed when it is built, as it is compiled in).
      resign_threshold: resign when the mover's win rate stays below this for
        ``resign_consecutive`` of its moves in a row; ``None`` never resigns
        (:meth:`allow_resignation` turns it on and off during a session).
      lag: seconds per move kept back from the clock for delays outside the search.
      seed: for the player's random choices.
      warm: compile and time the player's search for the first board now; False
        leaves it to the caller (:meth:`warm_again`), who changes the player first.
    """

    def __init__(
        self,
        player: Player,
        *,
        size: int = 19,
        komi: float = 7.5,
        rules: str = "tromp-taylor",
        visits: int = 1,
        resign_threshold: float | None = None,
        resign_consecutive: int = 3,
        lag: float = 1.0,
        seed: int = 0,
        warm: bool = True,
    ) -> None:
        self.player = player
        self.visits = int(visits)
        self.resign_threshold = resign_threshold
        # The threshold resignation turns back on with: the one given, else KataGo's.
        self._resign_when_allowed = (
            KATAGO_RESIGN_WINRATE if resign_threshold is None else resign_threshold
        )
        self.resign_consecutive = int(resign_consecutive)
        self.max_time = math.inf  # seconds a genmove may think, whatever the clock allows
        self.max_ponder_time = math.inf  # seconds an analysis (ponder) search may grow
        # KataGo's analysisIgnorePreRootHistory: the network of an analysis (ponder)
        # sees no move before the analysed position.
        self.analysis_ignore_pre_root_history = True
        # KataGo's ponderingEnabled: a search player thinks on the opponent's time.
        self.pondering = False
        # KataGo's delayMoveScale and delayMoveMax (:func:`move_delay`): off by default.
        self.delay_move_scale = 0.0
        self.delay_move_max = DELAY_MOVE_MAX
        self._delays = np.random.default_rng(seed)
        self.lag = float(lag)
        self._key = jax.random.key(seed)
        self._calls = 0
        self.komi = float(komi)
        self.rules = get_rules(rules).name
        self.time_settings = TimeSettings()
        self.clocks = {BLACK: Clock(), WHITE: Clock()}
        self.genmove_seconds = 0.0  # GTP ``cputime``: wall time spent in genmove so far
        self._warm: set[tuple[int, str]] = set()
        self._raw_nn: tuple[object, object] | None = None  # (model, jitted evaluation)
        self._no_warmup = not warm  # the caller warms up once it has set the player up
        self.set_size(size)
        self._no_warmup = False

    # -- game setup -----------------------------------------------------------

    def set_size(self, size: int) -> None:
        """GTP ``boardsize``: a new size clears the board."""
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise EngineError("unacceptable size")
        sizes = getattr(self.player, "board_sizes", None)
        if sizes is not None and size not in sizes:
            raise EngineError("unacceptable size")
        self.size = int(size)
        self.clear()

    def clear(self) -> None:
        """GTP ``clear_board``: an empty board, Black to play, clocks restarted."""
        self._start(np.zeros(self.size * self.size, np.int8), BLACK, handicap=0)
        self.clocks = {c: Clock.start(self.time_settings) for c in (BLACK, WHITE)}
        self._low_winrate = {BLACK: 0, WHITE: 0}
        self.player.new_game()

    @property
    def max_moves(self) -> int:
        """Move cap of the state, the length of its superko history: ``loadsgf`` refuses a
        longer game; ``play`` beyond it starts the history again (see ``_state_for``)."""
        return MOVES_PER_POINT * self.size * self.size

    def _new_state(self, board: np.ndarray, to_play: int) -> GoState:
        komi = self.komi + handicap_bonus(self.rules, self.handicap)
        return new_game(
            self.size,
            komi=komi,
            rules=self.rules,
            max_moves=self.max_moves,
            board=board,
            to_play=to_play,
        )

    def _start(self, board: np.ndarray, to_play: int, *, handicap: int) -> None:
        self.handicap = handicap
        self.setup = np.asarray(board, np.int8).copy()  # [P] stones before the first move
        self.first_player = to_play
        self.state = self._new_state(self.setup, to_play)
        self.history: list[GoState] = []  # the position before each move of ``moves``
        self.moves: list[Move] = []
        key = (self.size, self.rules)
        if key not in self._warm and not self._no_warmup:
            self._warm_player()
            self._warm.add(key)

    def _warm_player(self) -> None:
        """Compile and time the player's search for the game in progress, and what it
        ponders with when pondering is on."""
        self.player.warmup(self.state)
        if self.pondering:
            self.warm_pondering()

    def warm_pondering(self) -> None:
        """Compile what :meth:`think_ahead` runs, so that a ``genmove`` arriving while it
        runs does not wait for a compilation."""
        warm = getattr(self.player, "warmup_thinking", None)
        if warm is not None:
            warm(self.state)

    def set_komi(self, komi: float) -> None:
        """GTP ``komi``: changes the count of the game in progress."""
        if not math.isfinite(komi) or abs(komi) > 2 * self.size * self.size:
            raise EngineError("komi out of range")
        self.komi = float(komi)
        self._replay(self.setup, self.first_player, self.handicap, self.moves)

    def set_rules(self, rules: str) -> None:
        """``kata-set-rules``: another preset for the same position (moves replayed)."""
        name = get_rules(rules).name
        old = self.rules
        self.rules = name
        try:
            self._replay(self.setup, self.first_player, self.handicap, self.moves)
        except EngineError:
            self.rules = old
            raise EngineError(f"the game so far is illegal under {name} rules") from None

    def _replay(self, board, to_play, handicap, moves: list[Move]) -> None:
        saved = (self.handicap, self.setup, self.first_player, self.state, self.history, self.moves)
        try:
            self._start(board, to_play, handicap=handicap)
            self._play_all(moves)
        except EngineError:
            (
                self.handicap,
                self.setup,
                self.first_player,
                self.state,
                self.history,
                self.moves,
            ) = saved
            raise

    def _play_all(self, moves: list[Move]) -> None:
        """``play`` each of ``moves``, the history kept for ``undo``; raises EngineError
        ("illegal move") with the game part-played (the caller restores it).

        A long list is played in compiled segments (:mod:`eval.engine_replay`); a
        short one, or one that passes the move cap, where ``play`` restarts the
        history, move by move.
        """
        passing = self.size * self.size
        if not SEGMENT <= len(moves) <= self.max_moves - int(self.state.move_number):
            for move in moves:
                self.play(move.colour, move.action)
            return
        if any(m.colour not in (BLACK, WHITE) or not 0 <= m.action <= passing for m in moves):
            raise EngineError("illegal move")
        colours = [m.colour for m in moves]
        final, before, illegal = replay_moves(self.state, colours, [m.action for m in moves])
        if illegal >= 0:
            raise EngineError("illegal move")
        self.history += before
        self.moves += moves
        self.state = final

    @property
    def board_empty(self) -> bool:
        return not self.moves and not np.any(self.setup)

    def fixed_handicap(self, stones: int) -> list[int]:
        """GTP ``fixed_handicap``: the standard points; White to play. Returns the points."""
        if not self.board_empty:
            raise EngineError("board not empty")
        try:
            points = handicap_points(self.size, stones)
        except ValueError:
            raise EngineError("invalid number of stones") from None
        self._place_handicap(points)
        return points

    def place_free_handicap(self, stones: int) -> list[int]:
        """GTP ``place_free_handicap``: the fixed points where they exist, then the
        points the network likes best for Black (one evaluation per stone)."""
        if not self.board_empty:
            raise EngineError("board not empty")
        if not 2 <= stones <= self.size * self.size - 1:
            raise EngineError("invalid number of stones")
        points: list[int] = []
        for n in range(min(stones, 9), 1, -1):
            try:
                points = handicap_points(self.size, n)
                break
            except ValueError:
                continue
        board = np.zeros(self.size * self.size, np.int8)
        board[points] = BLACK
        while len(points) < stones:
            state = self._new_state(board, BLACK)
            best = self.player.evaluate(state).moves
            free = [m.action for m in best if m.action < board.size and board[m.action] == 0]
            if free:
                point = free[0]
            else:  # the player's list ran dry: the first empty point
                point = int(np.flatnonzero(board == 0)[0])
            points.append(point)
            board[point] = BLACK
        self._place_handicap(points)
        return points

    def set_free_handicap(self, points: list[int]) -> None:
        """GTP ``set_free_handicap``: the controller's points."""
        if not self.board_empty:
            raise EngineError("board not empty")
        if len(points) < 2 or len(points) >= self.size**2:
            raise EngineError("bad vertex list")
        try:
            self._place_handicap(points)
        except SetupError as err:
            raise EngineError(f"bad vertex list: {err}") from None

    def set_position(self, stones: list[tuple[int, int]]) -> None:
        """KataGo's ``set_position``: the board holds ``stones`` (``(colour, point)``
        pairs) and nothing else, with no move history (no ko or superko ban yet, no
        prisoners, no handicap) and Black to play; none clears the board.

        Raises EngineError, the position unchanged, if a point is given twice or a
        chain would have no liberty (:func:`gojax.place_stones`).
        """
        if not stones:
            self.clear()
            return
        try:
            board = place_stones(self.size, stones)
        except SetupError as err:
            raise EngineError(f"illegal stone placements: {err}") from None
        self._start(board, BLACK, handicap=0)
        self._low_winrate = {BLACK: 0, WHITE: 0}
        self.player.new_game()

    def _place_handicap(self, points: list[int]) -> None:
        """Black stones at ``points``, White to play; raises SetupError, nothing changed,
        for a point off the board or given twice."""
        board = place_stones(self.size, [(BLACK, point) for point in points])
        self._start(board, WHITE, handicap=len(points))

    # -- moves --------------------------------------------------------------

    def _state_for(self, colour: int) -> GoState:
        """The position with ``colour`` to move, the game going on.

        A move out of turn hands ``colour`` the move (as KataGo and GnuGo do)
        and lifts the ko ban; after two passes the game resumes; at the move
        cap, its superko history full, the position is restarted with the same
        stones and prisoners (a repetition of a position from before the restart
        goes unnoticed; ``loadsgf`` refuses a game that long instead).
        """
        state = self.state
        if bool(state.terminated):
            if int(state.move_number) >= state.max_moves:
                restarted = self._new_state(np.asarray(state.board), int(state.to_play))
                state = restarted.replace(captures=state.captures)
            else:
                state = _live(state)
        if int(state.to_play) != colour:
            state = state.replace(to_play=jnp.asarray(colour, jnp.int8), ko=jnp.int16(-1))
        return state

    def is_legal(self, colour: int, action: int) -> bool:
        if not 0 <= action <= self.size * self.size:
            return False
        return bool(legal_moves(self._state_for(colour))[action])

    def play(self, colour: int, action: int) -> None:
        """GTP ``play``; raises EngineError("illegal move")."""
        if colour not in (BLACK, WHITE) or not 0 <= action <= self.size * self.size:
            raise EngineError("illegal move")
        state = self._state_for(colour)
        if not bool(legal_moves(state)[action]):
            raise EngineError("illegal move")
        self.history.append(self.state)
        self.moves.append(Move(colour, action))
        self.state = play(state, jnp.int32(action))

    def undo(self) -> None:
        """GTP ``undo``: take back the last move; raises EngineError("cannot undo")."""
        if not self.moves:
            raise EngineError("cannot undo")
        self.moves.pop()
        # A replayed game's history is kept in host memory (eval.engine_replay).
        self.state = jax.device_put(self.history.pop())
        self.player.new_game()

    @property
    def to_play(self) -> int:
        return int(self.state.to_play)

    def _next_key(self) -> jax.Array:
        self._calls += 1
        return jax.random.fold_in(self._key, self._calls)

    def analyze(
        self,
        colour: int | None = None,
        *,
        visits: int | None = None,
        seconds: float | None = None,
        progress=None,
        avoid: np.ndarray | None = None,
        stop: threading.Event | None = None,
    ) -> Analysis:
        """Analyse the position with ``colour`` to move (default: whoever is to move),
        keeping out the moves ``avoid [2, A]`` names (``gojax.search.search``'s); once
        ``stop`` is set the search ends with what it has (KataGo's ``_cancellable``)."""
        state = self._state_for(self.to_play if colour is None else colour)
        deadline = None if seconds is None else time.monotonic() + seconds
        return self.player.analyze(
            state,
            visits=self.visits if visits is None else visits,
            key=self._next_key(),
            deadline=deadline,
            progress=progress,
            avoid=avoid,
            stop=stop,
        )

    def ponder(self, colour: int | None = None, avoid: np.ndarray | None = None):
        """Endless analyses (deeper and deeper) for ``lz-analyze``/``kata-analyze``.

        With ``analysis_ignore_pre_root_history`` (KataGo's default) a network sees the
        position with no past moves and, below it, only the moves searched since: a
        search player's pondered tree is then its own, not continued by the next
        ``genmove`` (KataGo's GTP engine also starts again when it switches between
        analysing and moving) but by the analysis after a move, as KataGo's: the
        subtree below the moves played, its root re-evaluated as shown."""
        state = self._state_for(self.to_play if colour is None else colour)
        if self.analysis_ignore_pre_root_history and self.network() is not None:
            shown = _forget_history(state)
            return self.player.ponder(shown, key=self._next_key(), avoid=avoid, game=state)
        return self.player.ponder(state, key=self._next_key(), avoid=avoid)

    def think_ahead(self, stop: threading.Event) -> None:
        """KataGo's pondering: grow the player's tree of the position to play (the
        opponent's move, after a ``genmove``) until ``stop`` is set, the tree has
        ``ponder_visits`` root visits or ``max_ponder_time`` passed; the next
        ``genmove`` goes on from it. Nothing before the first move, after the game
        ended, or for a player without a tree to grow."""
        think = getattr(self.player, "think", None)
        if think is None or not self.moves or bool(self.state.terminated):
            return
        deadline = time.monotonic() + self.max_ponder_time
        state = self._state_for(self.to_play)  # as the genmove will search it
        think(state, key=self._next_key(), stop=stop, deadline=deadline)

    def network(self) -> Any:
        """The player's network (a ``KataGoModel`` or ``TrainedModel``), or None for a
        player without one (UCT's rollout weights travel as ``variables`` but are no net)."""
        model = getattr(self.player, "model", None)
        if getattr(model, "variables", None) is None or not hasattr(model, "module"):
            return None
        return model

    def raw_nn(self, symmetries: list[int]) -> list[dict[str, np.ndarray]]:
        """KataGo's ``kata-raw-nn``: one network evaluation of the position to play under
        each of ``symmetries`` (0..7), as ``gojax.evaluate`` gives it (White's view,
        ``legal`` included). No policy optimism: KataGo's raw evaluation has none.

        Raises EngineError for a player without a network.
        """
        model = self.network()
        if model is None:
            raise EngineError("this player has no network")
        if self._raw_nn is None or self._raw_nn[0] is not model:
            from gojax.evaluate import evaluate

            run = functools.partial(evaluate, model.module(), version=model.output_spec)
            self._raw_nn = (model, jax.jit(run))
        state = self._state_for(self.to_play)
        states = jax.tree.map(lambda x: jnp.stack([x] * len(symmetries)), state)
        run = self._raw_nn[1]
        out = run(model.variables, states, symmetries=jnp.asarray(symmetries, jnp.int32))
        host = jax.device_get(out)
        return [{k: np.asarray(v[i]) for k, v in host.items()} for i in range(len(symmetries))]

    def time_for_move(self, colour: int) -> float | None:
        """Seconds ``colour`` may think now (``None``: no time limit): what the clock
        allows, at most ``max_time``."""
        seconds = allocate_time(
            self.time_settings,
            self.clocks[colour],
            moves_left=expected_moves_left(self.size, int(self.state.move_number)),
            lag=self.lag,
        )
        if math.isfinite(self.max_time):
            seconds = self.max_time if seconds is None else min(seconds, self.max_time)
        return seconds

    def allow_resignation(self, allowed: bool) -> None:
        """Resign (at the threshold the engine was made with, else KataGo's) or never."""
        if self.resign_threshold is not None:
            self._resign_when_allowed = self.resign_threshold
        self.resign_threshold = self._resign_when_allowed if allowed else None

    def warm_again(self) -> None:
        """Compile and time the player's search again for the game in progress (after
        its search changed) and forget the other sizes and rules it was warmed for."""
        self._warm_player()
        self._warm = {(self.size, self.rules)}

    def genmove(
        self,
        colour: int,
        *,
        progress=None,
        avoid: np.ndarray | None = None,
        cleanup: bool = False,
        play: bool = True,
        stop: threading.Event | None = None,
    ) -> tuple[int, Analysis]:
        """Choose a move for ``colour``, play it, and return it (or ``RESIGN``) with the analysis.

        ``play=False`` (KataGo's ``kata-search``) leaves the move to the controller's
        ``play``; the clock and the resignation count still take the search.

        ``stop``: once set, the search ends and the move is chosen from what it has
        (KataGo's ``kata-search_cancellable``).

        ``avoid`` keeps moves out of the search as in :meth:`analyze`.

        Resignation: when ``resign_threshold`` is set and the mover's win rate
        was below it at this and its previous ``resign_consecutive - 1`` moves.
        The engine also passes when the opponent just passed and the area
        count already gives ``colour`` the game, which ends games cleanly
        under area rules.

        ``cleanup`` (KGS's ``kgs-genmove_cleanup``, after the players disagreed
        on the dead stones): the game goes on until every dead stone is off the
        board, so the engine neither resigns nor passes while an opponent chain
        its ownership calls dead is on the board; it plays at a liberty of one
        (:meth:`_cleanup_move`).
        """
        start = time.monotonic()
        seconds = self.time_for_move(colour)
        analysis = self.analyze(colour, seconds=seconds, progress=progress, avoid=avoid, stop=stop)
        action = analysis.best.action
        self._delay_move(colour, analysis.best.prior, start, stop)
        threshold = self.resign_threshold
        if threshold is not None and analysis.winrate < threshold:
            self._low_winrate[colour] += 1
        else:
            self._low_winrate[colour] = 0
        if cleanup:
            action = self._cleanup_move(colour, analysis, avoid)
        elif threshold is not None and self._low_winrate[colour] >= self.resign_consecutive:
            action = RESIGN
        elif self._winning_pass(colour, analysis) and _may_pass(root_moves(avoid, colour)):
            action = self.size * self.size
        if action != RESIGN and play:
            self.play(colour, action)
        spent = time.monotonic() - start
        self.clocks[colour].spend(self.time_settings, spent)
        self.genmove_seconds += spent
        return action, analysis

    def _delay_move(
        self, colour: int, prior: float, start: float, stop: threading.Event | None
    ) -> None:
        """Wait :func:`move_delay` seconds (KataGo's ``delayMoveScale``), but never past
        the clock's share for this move (a bot that waits must not lose on time); a
        ``stop`` ends the wait."""
        delay = move_delay(prior, self.delay_move_scale, self.delay_move_max, self._delays)
        if delay <= 0:  # none set (KataGo's default)
            return
        share = allocate_time(
            self.time_settings,
            self.clocks[colour],
            moves_left=expected_moves_left(self.size, int(self.state.move_number)),
            lag=self.lag,
        )
        if share is not None:
            delay = min(delay, share - (time.monotonic() - start))
        if delay > 0:
            self._wait(delay, stop)

    @staticmethod
    def _wait(seconds: float, stop: threading.Event | None) -> None:
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)

    def _winning_pass(self, colour: int, analysis: Analysis) -> bool:
        last = self.moves[-1] if self.moves else None
        if last is None or last.colour == colour or last.action != self.size * self.size:
            return False
        # A pass now ends the game: count as final_score would then, with the ownership
        # the analysis of this position already holds (the mover's view).
        dead = self.dead_stones(game_over=True, ownership=analysis.ownership * colour)
        return self.margin(dead) * colour > 0

    def _cleanup_move(self, colour: int, analysis: Analysis, avoid: np.ndarray | None) -> int:
        """``colour``'s move while the dead stones are being removed: the search's best
        move unless it is a pass and an opponent chain is dead (by the ownership of this
        position's analysis); then the best liberty of a dead chain to fill.

        A liberty is a candidate when it is legal, left to ``colour`` by ``avoid``
        and the stone played there keeps two liberties or captures (no self-atari
        the opponent could answer by taking it); the candidates rank by the search's
        visits, then the policy's prior. With no candidate the engine plays the
        search's best non-pass move, and passes only if there is none.
        """
        passing = self.size * self.size
        best = analysis.best.action
        if best != passing:
            return best
        board = np.asarray(self.state.board)
        dead = self.dead_stones(game_over=False, ownership=analysis.ownership * colour)
        dead &= board == -colour
        if not dead.any():
            return passing
        neighbours = neighbor_table(self.size)  # [P, 4], P off the board
        liberties = np.unique(neighbours[np.flatnonzero(dead)])
        liberties = liberties[liberties < passing]
        liberties = liberties[board[liberties] == 0]
        state = self._state_for(colour)
        allowed = np.asarray(legal_moves(state))
        kept = root_moves(avoid, colour)
        if kept is not None:
            allowed = allowed & kept
        rank = {m.action: (m.visits, m.prior) for m in analysis.moves}
        candidates = []
        for point in liberties[allowed[liberties]]:
            after = play(state, jnp.int32(point))
            captures = int(np.sum(after.captures)) > int(np.sum(state.captures))
            if captures or int(after.liberties[point]) >= 2:
                candidates.append((rank.get(int(point), (0, 0.0)), -int(point)))
        if candidates:
            return -max(candidates)[1]
        others = [m.action for m in analysis.moves if m.action != passing]
        return others[0] if others else passing

    # -- time -----------------------------------------------------------------

    def set_time(self, settings: TimeSettings) -> None:
        """``time_settings``/``kgs-time_settings``: both clocks restart."""
        self.time_settings = settings
        self.clocks = {c: Clock.start(settings) for c in (BLACK, WHITE)}

    def time_left(self, colour: int, seconds: float, stones: int) -> None:
        self.clocks[colour].told(self.time_settings, seconds, stones)

    # -- scoring --------------------------------------------------------------

    def margin(self, dead: np.ndarray | None = None) -> float:
        """Black's margin by the rules' count (:func:`gojax.score`), handicap bonus in komi.

        ``dead``: ``[P]`` bool, stones removed first (the opponent's prisoners).
        """
        state = self.state if dead is None or not np.any(dead) else self._without(dead)
        return float(score(state))

    def _without(self, dead: np.ndarray) -> GoState:
        """The position with the ``dead`` stones taken off as the opponent's prisoners."""
        board = np.asarray(self.state.board)
        captured = [np.sum(dead & (board == WHITE)), np.sum(dead & (board == BLACK))]
        state = self._new_state(np.where(dead, 0, board).astype(np.int8), self.to_play)
        captures = np.asarray(self.state.captures, np.int64) + captured  # [by Black, by White]
        return state.replace(captures=jnp.asarray(captures, state.captures.dtype))

    def dead_stones(
        self, *, game_over: bool | None = None, ownership: np.ndarray | None = None
    ) -> np.ndarray:
        """``[P]`` bool: the stones ``final_score`` removes and ``final_status`` calls dead.

        None of them when the position counts as it stands (see the module's
        docstring); ``game_over`` (default: whether the game has ended) decides
        that under ``tromp-taylor`` rules. Otherwise :func:`dead_chains` of
        ``ownership`` (``[P]``, Black's view) or, if None, of one network
        evaluation of the position.
        """
        board = np.asarray(self.state.board)
        over = bool(self.state.terminated) if game_over is None else game_over
        as_it_stands = self.rules == "tromp-taylor" and over
        if as_it_stands or not self.player.has_ownership or not np.any(board):
            return np.zeros(board.shape, bool)
        if ownership is None:
            ownership = self.evaluate().ownership * self.to_play  # Black's view
        return dead_chains(board, np.asarray(self.state.chain), ownership)

    def evaluate(self) -> Analysis:
        """The player's own evaluation of the position (no search), from the view of the
        player to move; a finished game is evaluated as if it went on."""
        return self.player.evaluate(_live(self.state))

    def final_score(self) -> str:
        """GTP ``final_score``: ``B+3.5``, ``W+0.5`` or ``0``, dead stones removed."""
        return result_string(self.margin(self.dead_stones()))

    def final_status(self, status: str) -> list[int]:
        """Points of the stones with ``status`` (``alive``, ``dead``, ``seki``).

        Dead as :meth:`dead_stones` judges them; seki is not told apart from
        life (that list is always empty, the stones in seki ``alive``).
        """
        if status not in ("alive", "dead", "seki"):
            raise EngineError("syntax error")
        board = np.asarray(self.state.board)
        if status == "seki":
            return []
        dead = self.dead_stones()
        chosen = dead if status == "dead" else (board != 0) & ~dead
        return [int(p) for p in np.flatnonzero(chosen)]

    # -- records --------------------------------------------------------------

    def to_record(self) -> sgf.GameRecord:
        """The game so far as an SGF record (root setup, then the moves)."""
        setup_black = [int(p) for p in np.flatnonzero(self.setup == BLACK)]
        setup_white = [int(p) for p in np.flatnonzero(self.setup == WHITE)]
        nodes = [sgf.Node(color=_colour(m.colour), action=m.action) for m in self.moves]
        first = _colour(self.first_player)
        return sgf.GameRecord(
            size=self.size,
            komi=self.komi,
            rules=self.rules,
            handicap=self.handicap,
            setup_black=setup_black,
            setup_white=setup_white,
            # PL only where it is not what a reader would assume.
            to_play=first if (first == "W") != (self.handicap > 1) else None,
            player_black=None,
            player_white=None,
            extra={"AP": ["gojax"]},
            nodes=nodes,
        )

    def to_sgf(self) -> str:
        return sgf.dumps(self.to_record())

    def load_record(self, record: sgf.GameRecord, move_number: int | None = None) -> None:
        """GTP ``loadsgf``: size, komi, rules (``RU[]``) and the position before move
        ``move_number`` (1-based; all moves when ``None``). Later setup nodes
        (``AB``/``AW``/``AE`` after the root) are not supported, nor a game longer
        than :attr:`max_moves` for the size (its superko history would not fit)."""
        if not MIN_SIZE <= record.size <= MAX_SIZE:
            raise EngineError("unacceptable size")
        if any(n.add_black or n.add_white or n.add_empty for n in record.nodes):
            raise EngineError("setup stones after the first node are not supported")
        rules = rules_of_record(record, default=self.rules)
        stones = [(BLACK, p) for p in record.setup_black] + [(WHITE, p) for p in record.setup_white]
        try:
            board = place_stones(record.size, stones + [(EMPTY, p) for p in record.setup_empty])
        except SetupError as err:
            raise EngineError(f"illegal setup stones: {err}") from None
        first = BLACK
        if record.to_play in ("B", "W"):
            first = BLACK if record.to_play == "B" else WHITE
        elif record.setup_black and not record.setup_white and record.handicap > 1:
            first = WHITE
        handicap = record.handicap if record.handicap > 1 and not record.setup_white else 0
        moves = [Move(BLACK if c == "B" else WHITE, int(a)) for c, a in record.moves]
        if move_number is not None:
            moves = moves[: max(move_number - 1, 0)]
        limit = MOVES_PER_POINT * record.size * record.size  # max_moves of that size
        if len(moves) > limit:
            raise EngineError(
                f"{len(moves)} moves, more than the {limit} ({MOVES_PER_POINT} x "
                f"{record.size} x {record.size}) whose superko history the engine keeps"
            )
        saved = (self.size, self.komi, self.rules)
        self.size, self.komi, self.rules = record.size, float(record.komi), rules
        try:
            self._replay(board, first, handicap, moves)
        except EngineError:
            self.size, self.komi, self.rules = saved
            raise EngineError("illegal move in the file") from None
        self._low_winrate = {BLACK: 0, WHITE: 0}
        self.player.new_game()


RULES_FOR_KGS = {
    "chinese": "chinese-ogs",
    "aga": "aga",
    "new_zealand": "new-zealand",
    "japanese": "japanese",
}


# KataGo's engine (final_status_list, final_score) calls a chain alive when its
# stones' mean ownership for their own colour is above 0.2 and none is below -0.6.
ALIVE_MEAN_OWNERSHIP = 0.2
ALIVE_WORST_OWNERSHIP = -0.6


def dead_chains(board: np.ndarray, chain: np.ndarray, ownership: np.ndarray) -> np.ndarray:
    """``[P]`` bool: the stones of the chains the ownership calls dead.

    Args:
      board: ``[P]`` stones (+1 black, -1 white, 0 empty).
      chain: ``[P]`` each stone's chain label (``GoState.chain``).
      ownership: ``[P]`` in [-1, 1], +1 owned by Black.

    A chain lives when the mean of its stones' ownership for their own colour
    is above :data:`ALIVE_MEAN_OWNERSHIP` and its worst stone's above
    :data:`ALIVE_WORST_OWNERSHIP`; whole chains live or die together.
    """
    board = np.asarray(board)
    stones = np.flatnonzero(board)
    if not len(stones):
        return np.zeros(board.shape, bool)
    own = np.asarray(ownership, np.float64)[stones] * board[stones]
    _, label = np.unique(np.asarray(chain)[stones], return_inverse=True)
    count = np.bincount(label)
    mean = np.bincount(label, weights=own) / count
    worst = np.full(len(count), np.inf)
    np.minimum.at(worst, label, own)
    alive = (mean > ALIVE_MEAN_OWNERSHIP) & (worst > ALIVE_WORST_OWNERSHIP)
    dead = np.zeros(board.shape, bool)
    dead[stones] = ~alive[label]
    return dead


def rules_json(name: str) -> dict:
    """``kata-get-rules``: a preset in KataGo's JSON form."""
    rules = RULE_PRESETS[name]
    bonus = {"none": "0", "n": "N", "n-1": "N-1"}[rules.handicap_bonus]
    return {
        "hasButton": False,
        "ko": rules.ko.upper(),
        "scoring": rules.scoring.upper(),
        "suicide": rules.multi_stone_suicide,
        "tax": "SEKI" if rules.territory else "NONE",
        "whiteHandicapBonus": bonus,
    }


def rules_from_json(fields: dict) -> str:
    """The preset matching KataGo's JSON rules; raises EngineError where none does."""
    wanted = rules_json("tromp-taylor") | {
        "ko": None,
        "suicide": None,
        "whiteHandicapBonus": None,
    }
    for key, value in fields.items():
        wanted[key] = str(value).upper() if isinstance(value, str) else value
    for name in RULE_PRESETS:
        candidate = rules_json(name)
        if all(wanted[k] is None or wanted[k] == candidate[k] for k in candidate):
            if set(wanted) == set(candidate):
                return name
    raise EngineError("rules not supported")
