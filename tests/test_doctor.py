"""`playground/doctor.py` as a real subprocess: backend, versions against uv.lock, a throughput probe."""

import json
import tomllib

from helpers import REPO_ROOT
from helpers import run_cli

DOCTOR = REPO_ROOT / "playground" / "doctor.py"


def test_doctor_json_reports_backend_versions_and_throughput():
  result = run_cli("--json", "--probe_seconds", 2, script=DOCTOR, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout)
  assert report["backend"]["backend"] == "cpu" and report["backend"]["devices"]
  assert report["impl_auto"] == "jax"
  locked = {}
  for package in tomllib.loads((REPO_ROOT / "uv.lock").read_text())["package"]:
    locked.setdefault(package["name"], set()).add(package.get("version"))
  for name, v in report["versions"].items():
    assert v["ok"] and v["installed"] in locked[name], (name, v)
  assert report["probe"]["env_steps_per_s"] > 0 and report["probe"]["training_steps_per_s"] > 0
  assert set(report["estimates"]) == {"full", "cpu", "quick"}
  assert report["estimates"]["full"]["hours"] > report["estimates"]["quick"]["hours"] > 0
