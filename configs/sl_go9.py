"""Supervised learning on 9x9 game records: AlphaGo's SL stage at laptop scale.

Run (the folder holds KataGo self-play games of 9x9)::

    gojax train-sl --config configs/sl_go9.py --workdir runs/sl_go9 \\
        --sgf-dir ../shared/reference/sgf/katago-9x9

Cost and result (2 CPU cores, 2026-11-29): 1500 learner steps in 100 s,
384 games read (1.4 epochs of the 270 training games). Held-out move
accuracy climbs from 8.2% (step 275) to 10.8%, policy loss from 3.98 to
3.66; the value overfits, as AlphaGo found when it trained on whole games:
held-out MSE 1.19 (0 would be perfect, 1 is predicting nothing) while the
training accuracy reaches 76%. 300 games are far too few for either head;
the run shows the pipeline, not a strong policy.
The held-out games (``data.holdout_games``) are the first usable files in
sorted order and are never trained on.
"""

from train.supervised import default_sl_config


def get_config():
    c = default_sl_config()
    c.board.size = 9
    c.board.komi = 7.0
    c.board.rules = "tromp-taylor"
    c.model.preset = "agz_tiny"
    c.data.holdout_games = 30
    c.data.window = 50_000
    c.data.min_size = 2_000
    c.data.games_per_chunk = 8
    c.data.samples_per_position = 8.0
    c.learner.batch_size = 128
    c.learner.learning_rate = 2e-3
    c.learner.total_steps = 1_500
    c.train.total_steps = 1_500
    c.train.max_minutes = 10.0
    c.train.checkpoint_every = 250
    c.train.eval_every = 250
    return c
