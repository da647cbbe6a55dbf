"""Every experiment config in ``configs/`` loads and passes its command's checks.

A config is run by hand, often long after it was written; a key renamed since
would otherwise show up only as an error at the start of someone's run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.sweep import check_config
from train import policy_gradient, rollout_balance, rollout_policy, supervised, value_network
from train.config_checks import check_run_config
from train.loop import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.py"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_loads_and_checks(path):
    config = load_config(path)
    if path.stem.startswith("sweep_"):
        check_config(config)
        return
    if path.stem.startswith("pg_"):
        policy_gradient.check_config(config)
        return
    if path.stem.startswith("value_"):
        value_network.check_config(config)
        return
    if path.stem.startswith("rollout_"):
        rollout_policy.check_config(config)
        return
    if path.stem.startswith("balance_"):
        rollout_balance.check_config(config)
        return
    if path.stem.startswith("sl_"):
        supervised.check_config(config)
        return
    check_run_config(config)


def test_every_config_is_listed_in_the_readme():
    readme = (CONFIGS[0].parent / "README.md").read_text()
    assert [p.name for p in CONFIGS if p.name not in readme] == []
