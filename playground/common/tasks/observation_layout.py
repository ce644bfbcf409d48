"""Declared observation layouts.

A layout names every block of an observation vector, in order, with its size.
It is declared once per robot and used by the environment (to assemble the
vector), by the ONNX export (written into the file's metadata) and by playback
and analysis tools (to slice a recorded observation by name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax.numpy as jp


@dataclasses.dataclass(frozen=True)
class ObservationLayout:
  """An ordered list of named blocks that make up a flat observation.

  Attributes:
    fields: ((name, size), ...) in the order they are concatenated.
  """

  fields: tuple[tuple[str, int], ...]

  @property
  def size(self) -> int:
    return sum(size for _, size in self.fields)

  @property
  def names(self) -> tuple[str, ...]:
    return tuple(name for name, _ in self.fields)

  @property
  def slices(self) -> dict[str, slice]:
    out, start = {}, 0
    for name, size in self.fields:
      out[name] = slice(start, start + size)
      start += size
    return out

  def extend(self, *fields: tuple[str, int]) -> ObservationLayout:
    """Returns a new layout with `fields` appended."""
    return ObservationLayout(self.fields + tuple(fields))

  def concat(self, blocks: Mapping[str, Any]) -> jp.ndarray:
    """Concatenates named blocks in layout order, checking every size.

    Args:
      blocks: name -> array whose flattened size equals the declared size.

    Raises:
      ValueError: if a block is missing, unexpected, or of the wrong size.
    """
    missing = [n for n in self.names if n not in blocks]
    extra = [n for n in blocks if n not in self.names]
    if missing or extra:
      raise ValueError(f"observation blocks missing={missing} unexpected={extra}")
    parts = []
    for name, size in self.fields:
      block = jp.ravel(jp.asarray(blocks[name]))
      if block.shape[0] != size:
        raise ValueError(f"observation block '{name}' has size {block.shape[0]}, expected {size}")
      parts.append(block)
    return jp.concatenate(parts)

  def split(self, obs: Any) -> dict[str, Any]:
    """Returns name -> obs[..., slice] for a (batched) observation."""
    return {name: obs[..., s] for name, s in self.slices.items()}

  def to_json(self) -> list[dict[str, Any]]:
    """Layout as [{'name', 'start', 'size'}, ...] for metadata files."""
    return [{"name": name, "start": s.start, "size": s.stop - s.start} for name, s in self.slices.items()]

  @classmethod
  def from_json(cls, blocks: Sequence[Mapping[str, Any]]) -> ObservationLayout:
    """The layout `to_json` wrote (e.g. a policy file's `observation_layout` metadata)."""
    return cls(tuple((str(block["name"]), int(block["size"])) for block in blocks))
