"""Between game records (SGF) and board states."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from gojax import sgf
from gojax._board import BLACK, EMPTY, WHITE, GoState, legal_moves, new_game, play, set_board
from gojax._coords import action_to_gtp, gtp_to_action
from gojax._rules import RULE_PRESETS, get_rules
from gojax._setup import SetupError, place_stones

DEFAULT_RULES = "tromp-taylor"


def rules_of_record(record: sgf.GameRecord, default: str = DEFAULT_RULES) -> str:
    """The preset an SGF ``RU[]`` names (``"Chinese"`` → ``chinese``), or ``default``."""
    if record.rules:
        try:
            return get_rules(record.rules).name
        except ValueError:
            pass
    return default


def state_at(
    record: sgf.GameRecord, *, move: int | None = None, rules: str | None = None
) -> GoState:
    """The position after ``move`` moves of ``record`` (all of them by default).

    Setup stones (root and later ``AB``/``AW``/``AE``) are applied, checked by
    :func:`gojax.place_stones`; a move by the player who is not to move (e.g.
    handicap stones given as moves) sets the player first, and a move after
    two passes resumes the game, as GTP engines do (``loadsgf`` reads such a
    record, and gojax's own ``printsgf`` writes one). Raises ValueError naming
    the move if a move is illegal under the rules, naming the setup if it sets
    a point twice or leaves a chain without a liberty, or if the size is
    unsupported.
    """
    rules = rules or rules_of_record(record)
    if rules not in RULE_PRESETS:
        rules = get_rules(rules).name
    size = record.size
    total = len(record.moves)
    if move is None:
        move = total
    if not 0 <= move <= total:
        raise ValueError(f"move {move} is out of range: the game has {total} moves")
    board = _setup(record.setup_black, record.setup_white, record.setup_empty, size, "in the root")
    first = BLACK
    if record.to_play in ("B", "W"):
        first = BLACK if record.to_play == "B" else WHITE
    elif record.setup_black and not record.setup_white and record.handicap > 1:
        first = WHITE
    max_moves = max(2 * size * size, total + 1)
    state = new_game(
        size, komi=record.komi, rules=rules, max_moves=max_moves, board=board, to_play=first
    )
    played = 0
    for node in record.nodes:
        if played == move:
            break
        if node.add_black or node.add_white or node.add_empty:
            where = f"before move {played + 1}"
            stones = _setup(node.add_black, node.add_white, node.add_empty, size, where, state)
            state = set_board(state, jnp.asarray(stones))
        if node.color is None:
            continue
        if bool(state.terminated):  # a move after two passes: the game goes on
            state = state.replace(terminated=jnp.asarray(False), passes=jnp.asarray(0, jnp.int8))
        colour = BLACK if node.color == "B" else WHITE
        if int(state.to_play) != colour:
            state = state.replace(to_play=jnp.asarray(colour, jnp.int8), ko=jnp.int16(-1))
        if not bool(legal_moves(state)[node.action]):
            vertex = action_to_gtp(node.action, size)
            raise ValueError(
                f"move {played + 1} ({node.color} {vertex}) is illegal under {rules} rules"
            )
        state = play(state, node.action)
        played += 1
    return state


def _setup(black, white, empty, size: int, where: str, state: GoState | None = None):
    """``[P]`` int8: the board (``state``'s, else empty) after one node's setup, checked."""
    stones = [(BLACK, p) for p in black] + [(WHITE, p) for p in white]
    stones += [(EMPTY, p) for p in empty]
    board = None if state is None else np.asarray(state.board)
    try:
        return place_stones(size, stones, board=board)
    except SetupError as err:
        raise SetupError(f"setup stones {where}: {err}", err.point) from None


def handicap_bonus(rules: str, handicap_stones: int) -> int:
    """Points White gets for ``handicap_stones`` under ``rules`` (KataGo: chinese N, aga N-1).

    Fewer than 2 Black stones before White's first move are not a handicap.
    """
    if handicap_stones < 2:
        return 0
    kind = get_rules(rules).handicap_bonus
    return {"none": 0, "n": handicap_stones, "n-1": handicap_stones - 1}[kind]


def handicap_stones(setup: np.ndarray, moves: list[tuple[int, int]], size: int) -> int:
    """How many handicap stones White is compensated for, as KataGo counts them.

    Black's setup stones plus the Black moves that open the game (a lone
    White pass between them does not end the opening; two White moves in a
    row mean a set-up problem, not a handicap). None with White setup
    stones, and fewer than two is no handicap.
    """
    if np.any(setup == WHITE):
        return 0
    opening = 0
    for i, (colour, action) in enumerate(moves):
        if colour != BLACK:
            if i + 1 < len(moves) and moves[i + 1][0] != BLACK:
                opening = 0
                break
            if action == size * size:
                continue
            break
        if action != size * size:
            opening += 1
    stones = int(np.sum(setup == BLACK)) + opening
    return stones if stones > 1 else 0


def state_from_moves(
    size: int,
    moves: list[tuple[str, str]],
    *,
    komi: float,
    rules: str,
    max_moves: int | None = None,
    runtime_rules: bool = False,
) -> GoState:
    """The position after ``moves``, ``[colour, GTP vertex]`` pairs from the empty board.

    This follows a GTP engine fed ``play`` commands (KataGo's semantics): a
    move by the player who is not to move first hands them the move and
    forgets the history (move history, ko and superko), and the Black moves
    that open a game before White's first are handicap stones
    (:func:`handicap_stones`: lone White passes between them included), for
    which White gets ``handicap_bonus`` points added to ``komi`` under
    chinese and aga rules. Raises ValueError naming the first illegal or
    unreadable move. ``runtime_rules``: the rules kept as data (``new_game``'s).
    """
    rules = get_rules(rules).name
    if max_moves is None:
        max_moves = max(2 * size * size, len(moves) + 1)
    played = []
    for colour, vertex in moves:
        colour_value = BLACK if str(colour).upper() == "B" else WHITE
        try:
            played.append((colour_value, gtp_to_action(vertex, size)))
        except ValueError:
            break  # reported below, at its place in the game
    stones = handicap_stones(np.zeros(size * size, np.int8), played, size)
    komi = float(komi) + handicap_bonus(rules, stones)
    state = new_game(size, komi=komi, rules=rules, max_moves=max_moves, runtime_rules=runtime_rules)
    for number, (colour, vertex) in enumerate(moves, start=1):
        colour = str(colour).upper()
        if colour not in ("B", "W"):
            raise ValueError(f"move {number}: colour {colour!r} is not B or W")
        action = gtp_to_action(vertex, size)
        player = BLACK if colour == "B" else WHITE
        if int(state.to_play) != player:
            captures = state.captures
            state = new_game(
                size,
                komi=komi,
                rules=rules,
                max_moves=max_moves,
                history=state.past_boards.shape[0],
                board=state.board,
                to_play=player,
                runtime_rules=runtime_rules,
            ).replace(captures=captures)
        if bool(state.terminated):
            raise ValueError(f"move {number} ({colour} {vertex}) comes after the game ended")
        if not bool(legal_moves(state)[action]):
            raise ValueError(f"move {number} ({colour} {vertex}) is illegal under {rules} rules")
        state = play(state, action)
    return state


def record_from_actions(
    actions, *, size: int, komi: float, rules: str, result: str | None = None, **info
) -> sgf.GameRecord:
    """A game record of ``actions`` played alternately from the empty board, Black first."""
    nodes = [
        sgf.Node(color="B" if i % 2 == 0 else "W", action=int(a)) for i, a in enumerate(actions)
    ]
    return sgf.GameRecord(
        size=size, komi=float(komi), rules=rules, result=result, nodes=nodes, **info
    )


def result_string(margin: float) -> str:
    """SGF ``RE[]`` text for Black's margin: ``B+3.5``, ``W+0.5``, ``0`` for a tie."""
    if margin > 0:
        return f"B+{margin:g}"
    if margin < 0:
        return f"W+{-margin:g}"
    return "0"
