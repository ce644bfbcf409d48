"""What this machine can do for training: `uv run playground/doctor.py [--json]`.

Reports the JAX backend and devices (and whether a CUDA install silently fell
back to the CPU), package versions against `uv.lock`, the MJX implementation
`impl=auto` picks here, the compilation cache, EGL/OSMesa for headless video,
and a short env-throughput probe with the time the presets would take here.
The probe's result is kept in `.tmp/doctor.json`; the runner reads it to warn
before a `--preset full` run on a CPU.
"""

from __future__ import annotations

import argparse
import ctypes.util
import importlib.metadata
import json
import logging
import os
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from playground.common.runs.directories import REPO_ROOT  # noqa: E402
from playground.common.train import backend  # noqa: E402 - after the XLA log level is set

logger = logging.getLogger("playground")

#: Packages whose versions must match `uv.lock` (results and speed depend on them).
PINNED = (
  "jax",
  "jaxlib",
  "brax",
  "mujoco",
  "mujoco-mjx",
  "playground",
  "warp-lang",
  "flax",
  "optax",
  "orbax-checkpoint",
  "onnxruntime",
)
PRESETS = ("full", "cpu", "quick")
#: Measured training env steps/s over env-only steps/s at the same batch (docs/results.md: 0.78-0.97).
TRAINING_PER_ENV = 0.8
PROBE_ENVS = 128
PROBE_STEPS_PER_CALL = 10


def check_backend() -> dict[str, Any]:
  """JAX backend and devices; `cuda_fallback` when jax[cuda12] is installed but JAX runs on the CPU."""
  import jax

  platform = jax.default_backend()
  try:
    cuda_plugin = importlib.metadata.version("jax-cuda12-plugin")
  except importlib.metadata.PackageNotFoundError:
    cuda_plugin = None
  return {
    "backend": platform,
    "devices": [str(d) for d in jax.devices()],
    "device_kind": jax.devices()[0].device_kind,
    "cuda_plugin": cuda_plugin,
    "cuda_fallback": cuda_plugin is not None and platform == "cpu",
  }


def check_versions(lock_path: Path = REPO_ROOT / "uv.lock") -> dict[str, dict[str, Any]]:
  """{package: {installed, locked, ok}} for the pinned packages."""
  locked: dict[str, set[str]] = {}
  try:
    lock = tomllib.loads(lock_path.read_text())
  except (OSError, tomllib.TOMLDecodeError):
    lock = {}
  for package in lock.get("package", []):
    if "version" in package:
      locked.setdefault(package["name"], set()).add(package["version"])
  out = {}
  for name in PINNED:
    try:
      installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      installed = None
    versions = sorted(locked.get(name, ()))
    out[name] = {"installed": installed, "locked": versions, "ok": installed is not None and installed in versions}
  return out


def check_cache() -> dict[str, Any]:
  """The persistent compilation cache the runner uses and its size."""
  path = backend.compilation_cache_dir(None)
  size, files = 0, 0
  if path.is_dir():
    for p in path.rglob("*"):
      if p.is_file():
        files += 1
        size += p.stat().st_size
  return {"path": str(path), "exists": path.is_dir(), "files": files, "size_mb": round(size / 2**20, 1)}


def check_video() -> dict[str, Any]:
  """Whether MuJoCo's offscreen renderer can find EGL or OSMesa."""
  egl = ctypes.util.find_library("EGL")
  osmesa = ctypes.util.find_library("OSMesa")
  return {"egl": egl, "osmesa": osmesa, "mujoco_gl": os.environ.get("MUJOCO_GL"), "ok": bool(egl or osmesa)}


def probe_throughput(seconds: float, num_envs: int = PROBE_ENVS) -> dict[str, Any]:
  """Env steps/s of the joystick env with domain randomization (jitted, after two warm-up calls)."""
  import jax

  from playground.common.runner import RunArgs
  from playground.common.train import vec_env
  from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner

  backend.setup_compilation_cache(None)
  runner = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain", preset="quick"))
  cfg = runner.resolve_config()
  env = runner.make_env("joystick", "flat_terrain", cfg.env_config)
  venv = vec_env.VecEnv(env, cfg.env_config.episode_length, runner.make_randomizer(env, cfg.env_config))
  _, state, steps = vec_env.random_action_rollout(venv, num_envs, PROBE_STEPS_PER_CALL, env.action_size)

  t0 = time.monotonic()
  for _ in range(2):  # the 2nd call may recompile
    state = jax.block_until_ready(steps(state))
  compile_s = time.monotonic() - t0
  calls, start = 0, time.monotonic()
  while calls == 0 or time.monotonic() - start < seconds:
    state = jax.block_until_ready(steps(state))
    calls += 1
  elapsed = time.monotonic() - start
  env_sps = calls * PROBE_STEPS_PER_CALL * num_envs / elapsed
  # The probe runs on one device. On a CPU the runner trains on one JAX device
  # per core (`--cpu_devices auto`), which scaled training 2.0x on 2 cores
  # (docs/results.md): count that in; a GPU trains on the device measured.
  devices = 1
  if jax.default_backend() == "cpu":
    from playground.common.train import distributed

    devices = distributed.available_cores()
  return {
    "env": "joystick/flat_terrain",
    "impl": getattr(env, "impl", "jax"),
    "num_envs": num_envs,
    "compile_s": round(compile_s, 1),
    "seconds": round(elapsed, 1),
    "env_steps_per_s": round(env_sps, 1),
    "training_devices": devices,
    "training_steps_per_s": round(env_sps * TRAINING_PER_ENV * devices, 1),
  }


def preset_estimates(training_sps: float) -> dict[str, dict[str, float]]:
  """{preset: {num_timesteps, hours}} at `training_sps` (an estimate: compilation and evaluations excluded)."""
  from playground.open_duck_mini_v2.runner import ppo_config

  out = {}
  for preset in PRESETS:
    steps = int(ppo_config("joystick", preset).num_timesteps)
    out[preset] = {"num_timesteps": steps, "hours": round(steps / max(training_sps, 1e-9) / 3600, 2)}
  return out


def diagnose(probe_seconds: float) -> dict[str, Any]:
  """Every check; the probe is skipped when `probe_seconds` is 0."""
  import jax

  report: dict[str, Any] = {
    "backend": check_backend(),
    "versions": check_versions(),
    "impl_auto": backend.resolve_impl("auto"),
    "compilation_cache": check_cache(),
    "video": check_video(),
    "probe": None,
    "estimates": None,
  }
  if probe_seconds > 0:
    probe = probe_throughput(probe_seconds)
    report["probe"] = probe
    report["estimates"] = preset_estimates(probe["training_steps_per_s"])
    backend.write_probe(
      {"backend": jax.default_backend(), "training_steps_per_s": probe["training_steps_per_s"], "written": time.time()}
    )
  return report


def format_report(r: dict[str, Any]) -> list[str]:
  """The report as readable lines."""
  b = r["backend"]
  lines = [f"JAX backend      {b['backend']} ({len(b['devices'])} device(s): {b['device_kind']})"]
  if b["cuda_fallback"]:
    lines.append(
      f"  WARNING: jax-cuda12-plugin {b['cuda_plugin']} is installed but JAX runs on the CPU "
      "(no GPU visible, or a driver/CUDA mismatch: check nvidia-smi and `uv run --extra cuda`)"
    )
  bad = [n for n, v in r["versions"].items() if not v["ok"]]
  lines.append("versions         " + ("all match uv.lock" if not bad else f"{len(bad)} differ from uv.lock"))
  for name in bad:
    v = r["versions"][name]
    lines.append(
      f"  {name}: installed {v['installed']}, uv.lock {', '.join(v['locked']) or '(absent)'} (run `uv sync`)"
    )
  lines.append(f"MJX impl=auto    {r['impl_auto']}")
  c = r["compilation_cache"]
  state = f"{c['files']} files, {c['size_mb']} MB" if c["exists"] else "not created yet"
  lines.append(f"compile cache    {c['path']} ({state}; set ${backend.CACHE_ENV} to move it)")
  v = r["video"]
  found = ", ".join(f"{k.upper()} {v[k]}" for k in ("egl", "osmesa") if v[k]) or "none"
  lines.append(f"headless video   {found}" + ("" if v["ok"] else " (install libegl1 or libosmesa6 for --video)"))
  p = r["probe"]
  if p is not None:
    lines.append(
      f"env throughput   {p['env_steps_per_s']:,.0f} env steps/s ({p['env']}, {p['num_envs']} envs, MJX {p['impl']}, "
      f"measured {p['seconds']} s after {p['compile_s']} s compiling)"
    )
    lines.append(
      f"estimated time   at ~{p['training_steps_per_s']:,.0f} training steps/s "
      f"({TRAINING_PER_ENV} x env x {p.get('training_devices', 1)} device(s); an estimate, compilation and "
      "evaluations excluded):"
    )
    for preset, e in r["estimates"].items():
      lines.append(f"  --preset {preset:<6} {e['num_timesteps']:>12,} steps  ~{_hours(e['hours'])}")
  return lines


def _hours(hours: float) -> str:
  return f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.0f} min"


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry point; prints the report (or JSON with --json)."""
  parser = argparse.ArgumentParser(description="Check what this machine can do for training.")
  parser.add_argument("--json", action="store_true", help="print the report as JSON")
  parser.add_argument(
    "--probe_seconds", type=float, default=10.0, help="length of the throughput probe (0: skip it); default 10"
  )
  args = parser.parse_args(argv)
  logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
  report = diagnose(args.probe_seconds)
  if args.json:
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
  else:
    sys.stdout.write("".join(line + "\n" for line in format_report(report)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
