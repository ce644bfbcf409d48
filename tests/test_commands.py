"""The joystick's command draws: the share of pure walks, side steps and turns."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from playground.common import configs
from playground.open_duck_mini_v2.model import commands
from playground.open_duck_mini_v2.tasks import joystick

DRAWS = 6000


def _draws(command_config, seed: int = 0) -> np.ndarray:
  keys = jax.random.split(jax.random.PRNGKey(seed), DRAWS)
  return np.asarray(jax.jit(jax.vmap(lambda k: commands.sample(k, command_config)))(keys))


def _moving_axes(draws: np.ndarray) -> np.ndarray:
  return np.abs(draws[:, commands.VELOCITY]) > 0.0


def test_single_axis_commands_are_pure_walks_side_steps_and_turns_in_equal_shares():
  config = joystick.default_config().command_config
  without_key = config.copy_and_resolve_references()
  del without_key["single_axis_prob"]
  plain = _draws(config)
  # At 0 the draws are those of a config without the key, draw for draw (earlier runs resume unchanged).
  np.testing.assert_array_equal(plain, _draws(without_key))
  # Three uniform draws almost never leave one axis alone: the card's pure commands are not trained.
  assert (_moving_axes(plain).sum(axis=1) == 1).mean() == 0.0

  config.single_axis_prob = 0.3
  mixed = _draws(config)
  moving = _moving_axes(mixed)
  counts = moving.sum(axis=1)
  # Binomial bounds (about 5 standard deviations at 6,000 draws): 30% of the 80% that move.
  assert abs((counts == 1).mean() - 0.3 * 0.8) < 0.03
  assert abs((counts == 0).mean() - 0.2) < 0.03
  single = moving[counts == 1]
  np.testing.assert_allclose(single.mean(axis=0), [1 / 3] * 3, atol=0.05)
  # The axis left moving keeps its range; the head commands are drawn as before.
  for axis, key in enumerate(commands.CONFIG_KEYS[commands.VELOCITY]):
    values = mixed[moving[:, axis] & (counts == 1), axis]
    lo, hi = config[key]
    assert lo <= values.min() < lo + 0.1 * (hi - lo) and hi - 0.1 * (hi - lo) < values.max() <= hi
  assert abs((np.abs(mixed[:, commands.HEAD]).sum(axis=1) == 0).mean() - config.zero_head_prob) < 0.04


@pytest.mark.parametrize("bad", [1.5, -0.1])
def test_a_bad_single_axis_share_names_the_valid_range(bad):
  config = joystick.default_config()
  config.command_config.single_axis_prob = bad
  with pytest.raises(configs.ConfigError, match=r"single_axis_prob must be a probability in \[0, 1\]"):
    joystick.Joystick(config=config)
