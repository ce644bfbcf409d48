"""Reads scalars back from TensorBoard event files (no TensorFlow needed).

Used by tests and scripts to check what a run logged:

    scalars = read_scalars("checkpoints/my_run")
    steps, values = zip(*scalars["eval/episode_reward"])
"""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

from tensorboardX.proto import event_pb2


def _records(path: Path):
  data = path.read_bytes()
  pos = 0
  while pos + 12 <= len(data):
    (length,) = struct.unpack("<Q", data[pos : pos + 8])
    start = pos + 12
    end = start + length
    if end + 4 > len(data):
      break  # a record still being written
    yield data[start:end]
    pos = end + 4


def read_scalars(log_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
  """{tag: [(step, value), ...]} from every event file in `log_dir`, by step."""
  out: dict[str, list[tuple[int, float]]] = defaultdict(list)
  for path in sorted(Path(log_dir).glob("events.out.tfevents.*")):
    for record in _records(path):
      event = event_pb2.Event.FromString(record)
      for value in event.summary.value:
        if value.HasField("simple_value"):
          out[value.tag].append((int(event.step), float(value.simple_value)))
  return {tag: sorted(points, key=lambda p: p[0]) for tag, points in out.items()}
