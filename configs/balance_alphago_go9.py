"""Simulation balancing of the fast rollout policy on 9x9 (Silver and Tesauro 2009).

After ``configs/rollout_alphago_go9.py``, whose policy is the start (the
games and the KataGo net are the reference data in ``../shared/reference``;
``--init``, ``--model`` and ``--sgf-dir`` point elsewhere)::

    gojax balance-rollout --config configs/balance_alphago_go9.py \\
        --workdir runs/balance_alphago_go9

Starts from the policy fitted to the moves of the same 300 KataGo games and
refits its weights so that the mean of its rollouts from a position matches
KataGo's value there. The first 100 games are held out, as in the fit to
the moves (the same games); two positions per game in every 10-move stage;
each step 32 training positions x (8 + 8) rollouts. Results in
docs/papers/alphago.md ("AlphaGo: the fast rollout policy").
"""

from train.rollout_balance import default_balance_config


def get_config():
    c = default_balance_config()
    c.seed = 0
    c.data.init = "runs/rollout_alphago_go9/rollout_policy.npz"
    c.data.model = "../shared/reference/katago/g170-b6c96-s175395328-d26788732.bin.gz"
    c.data.sgf_dir = "../shared/reference/sgf/katago-9x9"
    c.data.holdout_games = 100
    c.data.positions_per_game = 2
    c.data.bucket_width = 10
    c.train.total_steps = 200
    c.train.positions = 32
    c.train.rollouts = 8
    c.train.learning_rate = 0.01
    c.train.eval_every = 50
    c.train.checkpoint_every = 50
    c.train.plot_every = 50
    c.eval.rollouts = 16
    c.eval.max_positions = 512
    return c
