"""Widening a saved critic to a run whose critic observes more (`critic_growth.widen`)."""

import numpy as np

from playground.common.train import critic_growth

NORM = "training_state/normalizer_params"
VALUE = "training_state/params/value"


def _parts(actor: int, critic: int, hidden: int = 4, count: int = 1000) -> dict:
  rng = np.random.default_rng(critic)
  stats = lambda: {"state": rng.normal(size=actor), "privileged_state": rng.normal(size=critic)}  # noqa: E731
  return {
    NORM: {
      "count": {"hi": np.uint32(0), "lo": np.uint32(count)},
      "mean": stats(),
      "std": stats(),
      "summed_variance": stats(),
      "std_eps": np.float32(0.0),
    },
    VALUE: {
      "params": {
        "hidden_0": {"kernel": rng.normal(size=(critic, hidden)), "bias": rng.normal(size=hidden)},
        "hidden_1": {"kernel": rng.normal(size=(hidden, 1)), "bias": rng.normal(size=1)},
      }
    },
  }


def test_a_grown_critic_observation_gets_neutral_statistics_and_zero_weights():
  saved, wanted = _parts(3, 5), _parts(3, 7)
  out = critic_growth.widen(saved, wanted, "privileged_state", normalizer_path=NORM, value_path=VALUE)
  norm, value = out[NORM], out[VALUE]["params"]
  np.testing.assert_array_equal(norm["mean"]["state"], saved[NORM]["mean"]["state"])
  np.testing.assert_array_equal(norm["mean"]["privileged_state"][:5], saved[NORM]["mean"]["privileged_state"])
  np.testing.assert_array_equal(norm["mean"]["privileged_state"][5:], 0.0)
  np.testing.assert_array_equal(norm["std"]["privileged_state"][5:], 1.0)
  # summed variance / count = 1: the running statistics agree with the neutral std.
  np.testing.assert_array_equal(norm["summed_variance"]["privileged_state"][5:], 1000.0)
  np.testing.assert_array_equal(value["hidden_0"]["kernel"][5:], 0.0)
  np.testing.assert_array_equal(value["hidden_0"]["kernel"][:5], saved[VALUE]["params"]["hidden_0"]["kernel"])
  np.testing.assert_array_equal(value["hidden_1"]["kernel"], saved[VALUE]["params"]["hidden_1"]["kernel"])
  # Without the value network (`except-critic`) only the statistics are fitted.
  only = critic_growth.widen(saved, {NORM: wanted[NORM]}, "privileged_state", normalizer_path=NORM, value_path=None)
  assert set(only) == {NORM} and only[NORM]["mean"]["privileged_state"].shape == (7,)


def test_any_other_difference_is_not_a_grown_critic():
  widen = lambda saved, wanted: critic_growth.widen(  # noqa: E731
    saved, wanted, "privileged_state", normalizer_path=NORM, value_path=VALUE
  )
  assert widen(_parts(3, 7), _parts(3, 5)) is None  # a narrower critic
  assert widen(_parts(3, 5), _parts(3, 5)) is None  # nothing grew: the caller's own error stands
  assert widen(_parts(3, 5), _parts(4, 7)) is None  # the actor's observation changed too
  assert widen(_parts(3, 5, hidden=4), _parts(3, 7, hidden=8)) is None  # another network size
  missing = _parts(3, 7)
  missing[VALUE]["params"]["hidden_2"] = {"bias": np.zeros(1)}
  assert widen(_parts(3, 5), missing) is None  # a layer the checkpoint lacks
