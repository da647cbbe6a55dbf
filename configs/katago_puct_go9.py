"""KataGo's PUCT in self-play on 9x9, against mctx's PUCT at the same 16 simulations.

The experiment of docs/papers/katago.md ("KataGo: its PUCT in self-play"):
``configs/katago_aux_go9.py`` (KataGo ``tiny`` net, 16 simulations with root
Dirichlet noise, ownership and score targets, 32 games and 16 learner steps
an iteration, 1,200 learner steps) with the self-play search switched from
AlphaGo Zero's PUCT on mctx's normalised values (``search_kind = "puct"``) to
KataGo's (``"katago"``: raw utilities with first-play urgency, exploration
growing with the visits and the values' spread), on the value alone: no score
utility. (The recorded runs were meant to weigh scores too, but self-play's
evaluator then gave the search no score distribution; runs with the score
utility's weights set to 0 reproduced them bit for bit. The weights are 0
here so that this file reproduces what was recorded;
``configs/katago_puct_score_go9.py`` adds the score utility.) Everything else,
the games and the learner steps, is the control's; the policy targets are the
visit counts of either search.
Its control is that config's ``aux_on`` runs. Three seeds, run as those
were::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    gojax train --config configs/katago_puct_go9.py --workdir runs/kpuct \\
        --config.learner.num_devices=1
    gojax train --config configs/katago_puct_go9.py --workdir runs/kpuct_seed1 \\
        --config.learner.num_devices=1 --config.seed=1
    gojax train --config configs/katago_puct_go9.py --workdir runs/kpuct_seed2 \\
        --config.learner.num_devices=1 --config.seed=2

with three control runs of ``configs/katago_aux_go9.py`` (seeds 0, 1, 2,
workdirs ``runs/aux_on``, ``runs/aux_on_seed1``, ``runs/aux_on_seed2``); then
``configs/sweep_katago_puct_go9.py`` plays the nets against the control nets,
every net searching with the same plain PUCT, so that only what the nets
learned differs.

Cost and result (2 CPU cores shared with other work, 2026-12-04): 11-14
minutes a run. The policy targets spread over 5.5-8.1 moves on average
against the controls' 1.6-1.8; the nets won seven of the nine pairings
against the control nets, 72.5% of 1,152 games (docs/papers/katago.md). Each run's
own final evaluation searches with KataGo's PUCT, as its self-play did.
"""

from pathlib import Path

from train.loop import load_config


def get_config():
    c = load_config(Path(__file__).with_name("katago_aux_go9.py"))
    c.selfplay.search_kind = "katago"
    c.selfplay.static_score_utility = 0.0
    c.selfplay.dynamic_score_utility = 0.0
    return c
