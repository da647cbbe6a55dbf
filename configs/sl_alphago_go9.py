"""AlphaGo's SL policy network on 9x9 game records: its hand-made input planes at work.

The recipe of ``configs/sl_go9.py`` (the same games, hold-out, stream and
learner) with AlphaGo's networks (``gojax.nn.AlphaGoNet``, ``alphago_tiny``:
4 layers of 16 filters) on AlphaGo's 48 + 1 feature planes
(``gojax.alphago_planes``). The ablation ``--config.model.preset=alphago_tiny_raw``
is the same net seeing only the board and the move history (planes 12-47
zeroed), as in the paper's comparison::

    gojax train-sl --config configs/sl_alphago_go9.py --workdir runs/sl_alphago_go9 \\
        --sgf-dir ../shared/reference/sgf/katago-9x9

Results in docs/papers/alphago.md ("AlphaGo: the SL policy network's input features").
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("sl_go9.py"))
    c.model.preset = "alphago_tiny"
    return c
