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

The pieces below the engine live in private modules, this one names them too:
``eval._engine_time`` (time systems, clocks, a move's share of the time),
``eval._engine_scoring`` (dead stones and the final count, mixed into :class:`Engine`),
``eval._engine_records`` (the game's moves, SGF out and in, mixed in too),
``eval._engine_rules`` (the presets as KGS and KataGo's JSON name them) and
``eval._engine_error`` (:class:`EngineError`); ``eval.engine_replay`` replays a game's
moves in compiled segments.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from eval._engine_error import EngineError
from eval._engine_records import MOVES_PER_POINT, Move, _Records
from eval._engine_rules import RULES_FOR_KGS, rules_from_json, rules_json
from eval._engine_scoring import (
    ALIVE_MEAN_OWNERSHIP,
    ALIVE_WORST_OWNERSHIP,
    _Scoring,
    dead_chains,
)
from eval._engine_time import (
    DELAY_MOVE_MAX,
    Clock,
    TimeKind,
    TimeSettings,
    allocate_time,
    expected_moves_left,
    move_delay,
)
from eval.engine_replay import SEGMENT, replay_moves
from eval.players import Analysis, Player, _live, root_moves
from gojax import (
    BLACK,
    WHITE,
    GoState,
    SetupError,
    get_rules,
    handicap_points,
    legal_moves,
    new_game,
    place_stones,
    play,
)
from gojax.games import (
    MAX_SIZE,
    MIN_SIZE,
    handicap_bonus,
    neighbor_table,
)
from gojax.katago_features import forget_history

__all__ = [
    "ALIVE_MEAN_OWNERSHIP",
    "ALIVE_WORST_OWNERSHIP",
    "DELAY_MOVE_MAX",
    "KATAGO_RESIGN_WINRATE",
    "MOVES_PER_POINT",
    "RESIGN",
    "RULES_FOR_KGS",
    "Clock",
    "Engine",
    "EngineError",
    "Move",
    "TimeKind",
    "TimeSettings",
    "allocate_time",
    "dead_chains",
    "expected_moves_left",
    "move_delay",
    "rules_from_json",
    "rules_json",
]

RESIGN = -1  # genmove's answer when the engine resigns
# KataGo's default resignThreshold, -0.9 on its [-1, 1] win-loss utility, as a win rate.
KATAGO_RESIGN_WINRATE = 0.05
_forget_history = jax.jit(forget_history)  # one program, not an op by op dispatch


def _may_pass(allowed: np.ndarray | None) -> bool:
    """Whether the root moves ``allowed`` (``players.root_moves``) include a pass."""
    return allowed is None or bool(allowed[-1])


class Engine(_Scoring, _Records):
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
