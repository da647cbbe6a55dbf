"""Training: self-play, replay, the learner, checkpoints, and the trainers built on them.

* AlphaGo Zero's loop, ``gojax train``: ``train.loop`` (``train(config, workdir)``)
  over ``train.selfplay``, ``train.replay``, ``train.learner`` and ``train.model``;
  ``train.checkpoint``, ``train.continuation`` and ``train.provenance`` save, resume
  and record runs; ``train.config_checks`` refuses bad configs before a run starts.
* AlphaGo's trainers: ``train.supervised`` (SL policy and value from game records),
  ``train.policy_gradient``, ``train.value_network`` (on ``train.positions``),
  ``train.rollout_policy`` and ``train.rollout_balance``; ``train.steps`` is what
  most of them share around their steps.
* Games between nets during training: ``train.arena``, ``train.agents``,
  ``train.evaluation`` and ``train.gating``.
* ``train.export`` (a run's net as a KataGo model file) and ``train.cli`` (the
  ``gojax`` subcommands that train).
"""
