"""PPO hyper-parameters as data (importable without JAX)."""

from ml_collections import config_dict


def default_config() -> config_dict.ConfigDict:
  """PPO hyper-parameters (each robot runner provides its own values)."""
  return config_dict.ConfigDict(
    dict(
      num_timesteps=1_000_000,
      num_envs=256,
      unroll_length=20,
      batch_size=256,
      num_minibatches=8,
      num_updates_per_batch=4,
      learning_rate=3e-4,
      # Learning-rate schedule in env steps of the run (absolute, so a resume
      # with a larger --num_timesteps keeps it): `learning_rate` until
      # `learning_rate_decay_start`, then linear to `final_learning_rate` at
      # `learning_rate_decay_end` (equal to the start: a step down), constant
      # after. 0: a constant learning rate.
      learning_rate_decay_start=0,
      learning_rate_decay_end=0,
      final_learning_rate=1e-4,
      entropy_cost=1e-2,
      discounting=0.97,
      gae_lambda=0.95,
      clipping_epsilon=0.2,
      reward_scaling=1.0,
      max_grad_norm=1.0,
      normalize_observations=True,
      policy_hidden_layer_sizes=(128, 128, 128),
      value_hidden_layer_sizes=(256, 256, 256),
      activation="swish",
      init_noise_std=0.5,  # initial std of the action noise (before tanh)
      init_action_mean_scale=0.01,  # shrinks the initial action mean towards 0
      # True: every PPO batch also holds the mirror image of each trajectory
      # (`symmetry.augment`); needs a runner whose `policy_contract` has a mirror.
      symmetry_augmentation=False,
      policy_obs_key="state",
      value_obs_key="privileged_state",
      num_eval_envs=128,
      eval_every=1_000_000,
      log_every=100_000,
      checkpoint_every=0,  # env steps between checkpoints; 0: only at the end
      keep_last=5,  # complete checkpoints kept; 0 keeps all
    )
  )
