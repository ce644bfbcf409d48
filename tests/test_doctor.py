"""`playground/doctor.py` as a real subprocess: backend, versions against uv.lock, a throughput probe."""

import json
import tomllib

import pytest
from helpers import REPO_ROOT
from helpers import run_cli

from playground.common.train import backend

DOCTOR = REPO_ROOT / "playground" / "doctor.py"


@pytest.mark.slow
def test_doctor_json_reports_backend_versions_and_throughput():
  result = run_cli("--json", "--probe_seconds", 2, script=DOCTOR, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout)
  # Whatever the machine: the backend JAX found (not asked here: this process
  # would take the GPU's memory), and what `impl=auto` and the CUDA check make of it.
  b = report["backend"]
  assert b["backend"] in ("cpu", "gpu", "cuda", "tpu") and b["devices"], b
  assert report["impl_auto"] == backend.resolve_impl("auto", b["backend"])
  assert b["cuda_fallback"] == (b["cuda_plugin"] is not None and b["backend"] == "cpu")
  locked = {}
  for package in tomllib.loads((REPO_ROOT / "uv.lock").read_text())["package"]:
    locked.setdefault(package["name"], set()).add(package.get("version"))
  for name, v in report["versions"].items():
    assert v["ok"] and v["installed"] in locked[name], (name, v)
  assert report["probe"]["env_steps_per_s"] > 0 and report["probe"]["training_steps_per_s"] > 0
  assert set(report["estimates"]) == {"full", "cpu", "quick"}
  assert report["estimates"]["full"]["hours"] > report["estimates"]["quick"]["hours"] > 0
