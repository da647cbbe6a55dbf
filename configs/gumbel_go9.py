"""Gumbel AlphaZero against AlphaZero when self-play searches with few simulations.

The experiment of docs/papers/gumbel_alphazero.md ("Gumbel AlphaZero: learning with few
simulations", after Danihelka et al., "Policy improvement by planning with
Gumbel", ICLR 2022). ``go9_tiny`` (9x9, ``agz_tiny``, 32 games and 16
learner steps an iteration) with a fixed amount of data instead of a time
limit: 1,200 learner steps, 75 iterations, 2,400 self-play games, so that
every arm sees the same number of games whatever its search costs. Four
arms, one workdir each::

    gojax train --config configs/gumbel_go9.py --workdir runs/gumbel_n2
    gojax train --config configs/gumbel_go9.py --workdir runs/puct_n2 \\
        --config.selfplay.search_kind=puct
    gojax train --config configs/gumbel_go9.py --workdir runs/gumbel_n16 \\
        --config.selfplay.num_simulations=16
    gojax train --config configs/gumbel_go9.py --workdir runs/puct_n16 \\
        --config.selfplay.search_kind=puct --config.selfplay.num_simulations=16

and the two 2-simulation arms again with ``--config.seed=1`` (workdirs
``runs/gumbel_n2_seed1`` and ``runs/puct_n2_seed1``); then
``configs/sweep_gumbel_go9.py`` plays the final nets against each other and
against fixed opponents, all with the same search. Each arm ends
with the usual final evaluation (64 games against random play and 16-playout
UCT, searching with the arm's own kind and 16 simulations; a Gumbel arm
with the noise of self-play, ``eval.gumbel_scale = 1``, as recorded).

What differs between arms is only ``selfplay.search_kind`` and
``selfplay.num_simulations``: PUCT trains the policy towards the root's visit
counts (with two simulations: at most two moves, mostly the prior's own
favourite), Gumbel towards ``softmax(logits + sigma(completed Q))`` over every
legal move and plays the sequential-halving winner among moves sampled
without replacement.
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("go9_tiny.py"))
    c.selfplay.search_kind = "gumbel"
    c.selfplay.num_simulations = 2
    c.train.total_steps = 1_200
    c.train.max_minutes = 0.0  # equal data for every arm, not equal time
    c.train.checkpoint_every = 300
    c.train.keep_checkpoints = 4
    # The recorded final evaluations searched with the Gumbel noise of self-play.
    c.eval.gumbel_scale = 1.0
    return c
