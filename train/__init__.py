"""Self-play, replay, the learner, checkpoints and supervised learning (to come)."""
