"""The errors a run reports to its user: each is printed as one line, without a traceback.

`configs.ConfigError` (a bad flag or config value, exit status 2) lives with
the configuration it checks; these are the run's own.
"""


class RunError(RuntimeError):
  """A user-facing error of a run (printed as one line, exit status 2)."""


class NonFiniteError(RuntimeError):
  """The loss or the parameters became NaN/inf (exit status 3)."""
