"""Choice of the MJX implementation ("jax" or MuJoCo Warp) for a device."""

from __future__ import annotations

from playground.common.config import ConfigError

#: Values accepted by the `impl` config key.
IMPLS = ("auto", "jax", "warp")


def validate_impl(impl: str) -> None:
  """Raises ConfigError naming the valid choices for an unknown `impl`."""
  if impl not in IMPLS:
    raise ConfigError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")


def resolve_impl(impl: str, platform: str | None = None) -> str:
  """The implementation to use: `auto` picks the faster correct one here.

  `auto` is MuJoCo Warp on NVIDIA GPUs (MuJoCo's documentation reports it
  well ahead of the JAX implementation there) and the JAX implementation
  elsewhere: on a CPU it is about 3.5x faster than Warp for the Open Duck
  Mini V2 (BENCHMARKS.md), and Warp runs on no other accelerator.

  Args:
    impl: "auto", "jax" or "warp".
    platform: JAX platform to decide for (default: `jax.default_backend()`).
  """
  validate_impl(impl)
  if impl != "auto":
    return impl
  if platform is None:
    import jax  # pylint: disable=import-outside-toplevel

    platform = jax.default_backend()
  return "warp" if platform in ("gpu", "cuda") else "jax"
