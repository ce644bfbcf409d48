"""Configuration helpers: locked ConfigDicts and `key=value` overrides.

Configs are data. Each task has a `default_config()` returning a ConfigDict;
users change it from the command line with `--set path.to.key=value`. This
module parses those overrides, checks that every key exists, converts each
value to the type of the default, and produces one-line error messages that
name the valid choices.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ml_collections import config_dict


class ConfigError(ValueError):
  """A user-facing configuration error (bad key, bad value, bad choice)."""


def flatten(config: config_dict.ConfigDict | Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """Returns {'a.b.c': leaf} for every leaf of a (nested) ConfigDict."""
  out: dict[str, Any] = {}
  items = config.items()
  for key, value in items:
    path = f"{prefix}{key}"
    if isinstance(value, (config_dict.ConfigDict, dict)) and value:
      out.update(flatten(value, prefix=f"{path}."))
    else:
      out[path] = value
  return out


def _parse_literal(text: str) -> Any:
  lowered = text.strip().lower()
  if lowered in ("true", "false"):
    return lowered == "true"
  if lowered in ("none", "null"):
    return None
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def _coerce(key: str, default: Any, raw: str) -> Any:
  """Converts `raw` to the type of `default`, or raises ConfigError."""
  value = _parse_literal(raw)
  if default is None:
    return value
  if isinstance(default, bool):
    if isinstance(value, bool):
      return value
    raise ConfigError(f"--set {key}: expected true or false, got {raw!r}")
  if isinstance(default, int):
    if isinstance(value, int) and not isinstance(value, bool):
      return value
    if isinstance(value, float) and value.is_integer():
      return int(value)
    raise ConfigError(f"--set {key}: expected an integer, got {raw!r}")
  if isinstance(default, float):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
      return float(value)
    raise ConfigError(f"--set {key}: expected a number, got {raw!r}")
  if isinstance(default, str):
    return raw
  if isinstance(default, (tuple, list)):
    if not isinstance(value, (tuple, list)):
      raise ConfigError(f"--set {key}: expected a list like [1, 2], got {raw!r}")
    if key.endswith("_sizes"):
      # Layer sizes: any number of layers, each a positive whole number.
      if not value or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise ConfigError(f"--set {key}: expected layer sizes like (256, 256, 256), got {raw!r}")
      return type(default)(value)
    if len(default) and len(value) != len(default):
      raise ConfigError(f"--set {key}: expected {len(default)} values, got {len(value)}")
    converted = (
      [float(v) if isinstance(d, float) and isinstance(v, (int, float)) else v for d, v in zip(default, value)]
      if len(default)
      else list(value)
    )
    return type(default)(converted)
  return value


def suggest(key: str, choices: Iterable[str]) -> str:
  """Returns ' (did you mean X?)' for the closest choice, or ''."""
  close = difflib.get_close_matches(key, list(choices), n=1, cutoff=0.6)
  return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_key_message(key: str, valid: Sequence[str]) -> str:
  """One line naming the closest valid keys for an unknown dotted key."""
  parts = key.split(".")
  # Narrow the listing to the deepest existing prefix, so the line stays short.
  for depth in range(len(parts) - 1, -1, -1):
    prefix = ".".join(parts[:depth])
    scoped = [v for v in valid if not prefix or v.startswith(prefix + ".")]
    if scoped:
      break
  listing = ", ".join(sorted(scoped))
  where = f" under '{prefix}'" if prefix else ""
  return f"unknown config key '{key}'{suggest(key, valid)}; valid keys{where}: {listing}"


def parse_overrides(overrides: Sequence[str]) -> list[tuple[str, str]]:
  """Splits ['a.b=1', ...] into [('a.b', '1'), ...]."""
  pairs = []
  for item in overrides:
    if "=" not in item:
      raise ConfigError(f"--set expects key=value, got {item!r}")
    key, raw = item.split("=", 1)
    pairs.append((key.strip(), raw.strip()))
  return pairs


def add_override_argument(parser: Any, flag: str = "--set", help: str = "config override (repeatable)") -> None:
  """Adds the repeatable `KEY=VALUE` override flag (`args.overrides`) that `parse_overrides` reads."""
  parser.add_argument(flag, dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def apply_overrides(config: config_dict.ConfigDict, overrides: Sequence[tuple[str, str]]) -> config_dict.ConfigDict:
  """Returns a copy of `config` with typed `(key, raw_value)` overrides applied.

  Args:
    config: the default configuration.
    overrides: pairs from `parse_overrides`.

  Raises:
    ConfigError: for an unknown key or a value of the wrong type.
  """
  config = config_dict.ConfigDict(config.to_dict())
  flat = flatten(config)
  for key, raw in overrides:
    if key not in flat:
      raise ConfigError(unknown_key_message(key, list(flat)))
    value = _coerce(key, flat[key], raw)
    set_leaf(config, key, value)
    flat[key] = value
  config.lock()
  return config


def set_leaf(config: config_dict.ConfigDict, key: str, value: Any) -> None:
  """Sets the dotted `key` of `config` in place, whatever the leaf's current type."""
  node = config
  *parents, leaf = key.split(".")
  for p in parents:
    node = node[p]
  with node.ignore_type():
    node[leaf] = value


def check_choice(flag: str, value: str, choices: Sequence[str]) -> str:
  """Raises ConfigError naming the valid choices if `value` is not one."""
  if value not in choices:
    raise ConfigError(f"unknown {flag} '{value}'{suggest(value, choices)}; valid choices: " + ", ".join(choices))
  return value


def parse_cpu_devices(value: str | int | None) -> int | str | None:
  """Validates a `--cpu_devices` value: 'auto', a positive integer or None.

  Raises:
    ConfigError: with a one-line message naming the valid values.
  """
  if value is None or value == "auto":
    return value
  try:
    count = int(value)
  except (TypeError, ValueError):
    count = 0
  if count < 1 or str(value).strip() != str(count):
    raise ConfigError(f"--cpu_devices must be 'auto' or a positive integer (devices on the CPU), got {value!r}")
  return count


def named_file_digests(config: Any) -> dict[str, str]:
  """{path: sha256} for every string in a (nested) config that names an existing file."""
  out: dict[str, str] = {}

  def visit(value: Any) -> None:
    if isinstance(value, dict):
      for v in value.values():
        visit(v)
    elif isinstance(value, (list, tuple)):
      for v in value:
        visit(v)
    elif isinstance(value, str) and value and len(value) < 4096:
      path = Path(value).expanduser()
      try:
        if path.is_file():
          out[value] = hashlib.sha256(path.read_bytes()).hexdigest()
      except OSError:
        pass

  visit(config)
  return out


def jsonable(value: Any) -> Any:
  """`value` with tuples as lists and sets as sorted lists (for JSON)."""
  if isinstance(value, dict):
    return {k: jsonable(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)):
    return [jsonable(v) for v in value]
  if isinstance(value, (set, frozenset)):
    return sorted(value)
  return value
