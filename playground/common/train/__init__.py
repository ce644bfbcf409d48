"""Training: the batched env, PPO, the session, the loop, evaluation, step cache, progress and devices."""
