"""The training command line, run as real subprocesses."""

import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import orbax.checkpoint as ocp
import pytest
from helpers import REPO_ROOT
from helpers import run_cli
from tensorboardX import SummaryWriter

from playground.common import configs
from playground.common.configs import ConfigError
from playground.common.runner import RunArgs
from playground.common.runner import RunError
from playground.common.runs import compatibility
from playground.common.runs import directories
from playground.common.runs import resume
from playground.common.runs.tensorboard import read_scalars
from playground.common.train import distributed
from playground.open_duck_mini_v2 import runner as runner_module
from playground.open_duck_mini_v2.runner import OpenDuckMiniV2Runner
from playground.open_duck_mini_v2.tasks import gait_tables
from playground.open_duck_mini_v2.tasks import joystick


@pytest.mark.slow
def test_smoke_run_logs_tensorboard_scalars(smoke_run):
  run_dir, _ = smoke_run
  scalars = read_scalars(run_dir)
  for tag in (
    "eval/episode_reward",
    "eval/episode_reward_std",
    "eval/episode_length",
    "episode/reward",
    "episode/length",
    "episode/reward/alive",
    "episode/reward/tracking_lin_vel",
    "train/policy_loss",
    "train/v_loss",
    "train/entropy_loss",
    "train/learning_rate",
    "perf/sps",
    "perf/compile_time_s",
  ):
    assert tag in scalars, f"missing TensorBoard scalar {tag}"
  steps = [s for s, _ in scalars["eval/episode_reward"]]
  assert steps[0] == 0 and steps[-1] >= 2560
  assert all(v > 0 for _, v in scalars["perf/sps"])


@pytest.mark.slow
def test_smoke_run_writes_a_loadable_orbax_checkpoint_and_config(smoke_run):
  run_dir, _ = smoke_run
  step_dir = run_dir / "000000002560"
  assert step_dir.is_dir(), sorted(p.name for p in run_dir.iterdir())
  meta = json.loads((step_dir / "meta.json").read_text())
  assert meta["step"] == 2560 and meta["compat"]["observation_shapes"]["state"] == [101]
  with ocp.StandardCheckpointer() as checkpointer:
    tree = checkpointer.restore(step_dir / "state")
  policy = tree["training_state"]["params"]["policy"]["params"]
  assert policy["hidden_0"]["kernel"].shape == (101, 32)
  assert tree["training_state"]["normalizer_params"]["mean"]["state"].shape == (101,)
  config = json.loads((run_dir / "config.json").read_text())
  assert config["env"] == "joystick" and config["ppo_config"]["num_envs"] == 16
  assert config["env_config"]["ctrl_dt"] == 0.02 and "jax" in config["versions"]
  # impl=auto resolves to MJX's JAX implementation on a CPU.
  assert config["env_config"]["impl"] == "auto" and config["physics_impl"] == "jax"
  # --cpu_devices auto: one device per core that divides 16 training and 8 eval envs.
  devices = distributed.auto_cpu_devices(distributed.available_cores(), 16, 8)
  assert config["device_count"] == devices and config["flags"]["cpu_devices"] == "auto"
  assert f"on {devices} cpu device(s)" in smoke_run[1].stderr


@pytest.mark.parametrize(
  "args, expected",
  [
    (["--env", "walk"], "valid choices: joystick, standing"),
    (["--task", "moon"], "valid choices: flat_terrain, rough_terrain"),
    (["--preset", "huge"], "valid choices: full, cpu, quick, smoke"),
    (["--set", "reward_config.scales.alve=10"], "did you mean 'reward_config.scales.alive'"),
    (["--set", "ppo.learnin_rate=1"], "did you mean 'ppo.learning_rate'"),
    (["--set", "reward_config.scales.alive=lots"], "expected a number"),
    (["--bogus"], "valid flags:"),
    (["--restore_mode", "model"], "needs --restore_checkpoint_path"),
    (["--set", "impl=mjx"], "impl must be one of auto, jax, warp"),
    (["--cpu_devices", "0"], "--cpu_devices must be 'auto' or a positive integer"),
    (["--score_seeds", "0"], "at least 1"),
    (["--preset", "smoke", "--cpu_devices", "3"], "num_envs=16 must be divisible by the 3 devices"),
  ],
)
def test_bad_input_is_one_clear_line_and_touches_nothing(tmp_path, args, expected):
  result = run_cli("--output_dir", tmp_path / "runs", "--exp_name", "x", *args, timeout=300)
  assert result.returncode == 2
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert len(lines) == 1, result.stderr
  assert expected in lines[0]
  assert "Traceback" not in result.stderr
  assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_training_runs_on_the_warp_backend(tmp_path):
  """The whole training loop (rollout, PPO, eval, checkpoint, ONNX) on MuJoCo Warp."""
  result = run_cli(
    "--preset", "smoke", "--num_timesteps", "1280", "--set", "impl=warp",
    "--output_dir", tmp_path, "--exp_name", "warp",
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  run_dir = tmp_path / "warp"
  assert json.loads((run_dir / "config.json").read_text())["physics_impl"] == "warp"
  step_dir = run_dir / "000000001280"
  assert (step_dir / "policy.onnx").is_file(), sorted(p.name for p in run_dir.iterdir())
  rewards = [v for _, v in read_scalars(run_dir)["eval/episode_reward"]]
  assert len(rewards) >= 2 and all(math.isfinite(v) for v in rewards)


# ---- Run directories: names, --overwrite, --output_dir, --resume records, --list.


def listing(root: Path) -> list[tuple[str, str]]:
  """Every path under `root` with its kind and, for files, its content."""
  out = []
  for p in sorted(root.rglob("*")):
    kind = "link" if p.is_symlink() else ("dir" if p.is_dir() else "file")
    out.append((str(p.relative_to(root)), kind + (":" + p.read_text() if kind == "file" else "")))
  return out


def fake_run(run_dir: Path, steps=(2560,), planned=2560, **flags) -> Path:
  """A run directory as the runner leaves it: record, marker, checkpoint directories."""
  args = dataclasses.asdict(RunArgs(env="joystick", task="flat_terrain", preset="smoke", cpu_devices="auto"))
  args.update(extra={"reference": None, "allow_pickle": False}, **flags)
  args.pop("explicit")
  # The PPO config as the runner resolves and records it (preset, flags, --set).
  ppo = OpenDuckMiniV2Runner(RunArgs(**args)).resolve_config().ppo_config.to_dict()
  ppo["num_timesteps"] = planned
  record = {
    "robot": "open_duck_mini_v2",
    "env": args["env"],
    "task": args["task"],
    "preset": args["preset"],
    "env_config": {},
    "ppo_config": ppo,
    "flags": args,
  }
  run_dir.mkdir(parents=True)
  (run_dir / directories.CONFIG_FILE).write_text(json.dumps(record))
  for step in steps:
    step_dir = run_dir / directories.step_dir_name(step)
    (step_dir / "state").mkdir(parents=True)
    (step_dir / "meta.json").write_text(json.dumps({"step": step, "compat": {"seed": args["seed"]}}))
  return run_dir


def assert_one_line_error(result, expected):
  assert result.returncode == 2, result.stderr[-2000:]
  lines = [line for line in result.stderr.splitlines() if line.strip()]
  assert len(lines) == 1 and expected in lines[0], result.stderr[-2000:]
  assert "Traceback" not in result.stderr


@pytest.fixture
def workspace(tmp_path):
  """tmp/out holds a finished run and unrelated files; tmp/outside is a run outside --output_dir."""
  out = tmp_path / "out"
  fake_run(out / "done")
  (out / "notes").mkdir()
  (out / "notes" / "todo.txt").write_text("keep me")
  (out / "plain.txt").write_text("keep me too")
  fake_run(tmp_path / "outside")
  (out / "link").symlink_to(tmp_path / "outside")
  (tmp_path / "a_file").write_text("not a directory")
  return tmp_path


@pytest.mark.parametrize(
  "args, expected",
  [
    (["--exp_name", "..", "--overwrite"], "--exp_name '..' must be one directory name"),
    (["--exp_name", ".", "--overwrite"], "--exp_name '.' must be one directory name"),
    (["--exp_name", "", "--overwrite"], "--exp_name '' must be one directory name"),
    (["--exp_name", "done/x", "--overwrite"], "must be one directory name"),
    (["--exp_name", "../outside", "--overwrite"], "must be one directory name"),
    (["--exp_name", "a\\b", "--overwrite"], "must be one directory name"),
    (["--exp_name", "ABS", "--overwrite"], "must be one directory name"),
    (["--exp_name", "notes", "--overwrite"], "is not a run directory of this project"),
    (["--exp_name", "plain.txt", "--overwrite"], "exists and is not a directory"),
    (["--exp_name", "link", "--overwrite"], "which is not inside --output_dir"),
    (["--exp_name", "done"], "FileExistsError"),
    (["--exp_name", "x", "--output_dir", "A_FILE/runs"], "which is not a directory"),
    (["--exp_name", "x", "--output_dir", "A_FILE"], "is not a directory"),
  ],
)
def test_paths_that_could_delete_or_escape_are_refused_and_touch_nothing(workspace, args, expected):
  args = [str(workspace / "outside") if a == "ABS" else a.replace("A_FILE", str(workspace / "a_file")) for a in args]
  before = listing(workspace)
  result = run_cli("--preset", "smoke", "--output_dir", workspace / "out", *args, timeout=300)
  assert_one_line_error(result, expected)
  assert listing(workspace) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_output_dir_that_is_not_writable_is_refused(tmp_path):
  (tmp_path / "locked").mkdir(mode=0o555)
  result = run_cli("--preset", "smoke", "--output_dir", tmp_path / "locked" / "runs", "--exp_name", "x", timeout=300)
  assert_one_line_error(result, "is not writable")


def test_exp_name_must_be_one_path_component():
  for name in ("run", "run-2.b", "..hidden"):
    directories.check_exp_name(name)
  for name in ("", ".", "..", "a/b", "a\\b", "/abs", "nul\0byte"):
    with pytest.raises(directories.RunDirError, match="one directory name"):
      directories.check_exp_name(name)


def test_only_project_runs_inside_output_dir_are_deletable(workspace):
  out = workspace / "out"
  assert directories.deletable_run_dir(out / "done", out) == (out / "done").resolve()
  (out / "old").mkdir()
  (out / "old" / directories.MARKER).write_text("{}")
  assert directories.deletable_run_dir(out / "old", out) == (out / "old").resolve()
  (out / "inner").symlink_to(out / "done")
  assert directories.deletable_run_dir(out / "inner", out) == (out / "done").resolve()
  for name, message in (("notes", "not a run directory"), ("link", "not inside"), ("plain.txt", "not a directory")):
    with pytest.raises(directories.RunDirError, match=message):
      directories.deletable_run_dir(out / name, out)
  with pytest.raises(directories.RunDirError, match="not inside"):
    directories.deletable_run_dir(out, out)
  # A config.json of some other tool does not make a run.
  (out / "notes" / "config.json").write_text('{"name": "other tool"}')
  with pytest.raises(directories.RunDirError, match="not a run directory"):
    directories.deletable_run_dir(out / "notes", out)
  directories.delete_run_dir(out / "inner", out)
  assert not (out / "done").exists() and (workspace / "outside" / "config.json").is_file()


@pytest.mark.parametrize(
  "args, expected",
  [
    (["--seed", "3"], "--seed 3 conflicts with --seed 0 recorded in"),
    (["--env", "standing"], "--env standing conflicts with --env joystick"),
    (["--preset", "quick"], "--preset quick conflicts with --preset smoke"),
    (["--num_envs", "32"], "--num_envs 32 conflicts with --num_envs unset (16 from the preset)"),
    (["--set", "ppo.learning_rate=1"], "--set [ppo.learning_rate=1] conflicts with --set (none)"),
    (["--allow_pickle"], "--allow_pickle True conflicts with --allow_pickle False"),
  ],
)
def test_resume_refuses_flags_that_conflict_with_the_record(tmp_path, args, expected):
  run_dir = fake_run(tmp_path / "run", steps=(1280,))
  before = listing(tmp_path)
  result = run_cli("--output_dir", tmp_path, "--exp_name", "run", "--resume", *args, timeout=300)
  assert_one_line_error(result, expected)
  assert "drop" in result.stderr and str(run_dir / "config.json") in result.stderr
  assert listing(tmp_path) == before


def test_resume_takes_the_flags_from_the_record(tmp_path):
  fake_run(tmp_path / "run", steps=(1280,), seed=7, overrides=["ppo.learning_rate=0.01"], num_envs=16, eval_every=640)
  runner = OpenDuckMiniV2Runner(
    RunArgs(
      env="joystick",
      task="flat_terrain",
      output_dir=str(tmp_path),
      exp_name="run",
      resume=True,
      num_timesteps=5120,
      num_envs=16,
      explicit=frozenset({"output_dir", "exp_name", "resume", "num_timesteps", "env", "num_envs"}),
    )
  )
  resume.apply_record(runner)
  a = runner.args
  assert (a.preset, a.seed, a.num_envs, tuple(a.overrides)) == ("smoke", 7, 16, ("ppo.learning_rate=0.01",))
  assert (a.num_timesteps, a.eval_every, a.cpu_devices) == (5120, 640, "auto")
  assert a.extra == {"reference": None, "allow_pickle": False}
  assert runner.resolve_config().ppo_config.learning_rate == 0.01
  assert resume.resume_command(tmp_path / "my run").endswith(f"--output_dir {tmp_path} --exp_name 'my run' --resume")


def test_resume_keeps_the_recorded_config_when_presets_change(tmp_path):
  # A cpu-preset run recorded before the preset turned on the feed-forward (its
  # env config lacks the key) and with another learning rate than the preset's
  # now: a resume continues it as recorded, not as the presets resolve today.
  env_config = joystick.default_config().to_dict()
  del env_config["reference"]["feedforward"]
  env_config["reward_config"]["scales"]["alive"] = 7.5
  ppo = runner_module.ppo_config("joystick", "cpu").to_dict()
  ppo.update(learning_rate=1e-4, num_timesteps=2560)
  for key in ("learning_rate_decay_start", "learning_rate_decay_end", "final_learning_rate"):
    del ppo[key]  # recorded before the schedule existed
  run_dir = fake_run(tmp_path / "run", steps=(1280,), preset="cpu")
  record = json.loads((run_dir / "config.json").read_text())
  record.update(env_config=env_config, ppo_config=ppo)
  (run_dir / "config.json").write_text(json.dumps(record))

  def resumed(**flags):
    explicit = frozenset({"output_dir", "exp_name", "resume", "env", *flags})
    args = RunArgs(env="joystick", task="flat_terrain", output_dir=str(tmp_path), exp_name="run", resume=True)
    runner = OpenDuckMiniV2Runner(dataclasses.replace(args, explicit=explicit, **flags))
    resume.apply_record(runner)
    return runner.resolve_config()

  cfg = resumed(num_timesteps=5120)
  assert cfg.env_config.reference.feedforward is False  # the env default, not the cpu preset's True
  assert cfg.env_config.reward_config.scales.alive == 7.5
  assert cfg.ppo_config.learning_rate == 1e-4
  assert cfg.ppo_config.learning_rate_decay_start == 0  # constant, as before; not the cpu preset's drop
  assert cfg.ppo_config.num_timesteps == 5120  # a flag a resume may change
  assert resumed().ppo_config.num_timesteps == 2560
  # A new run with the same flags gets today's preset.
  fresh = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain", preset="cpu")).resolve_config()
  assert fresh.env_config.reference.feedforward is True and fresh.ppo_config.learning_rate == 3e-4


def test_resume_refuses_a_run_whose_built_in_reference_gait_changed(tmp_path):
  # The built-in gait is project data that an update may regenerate (stride_gain
  # 1.5 -> 1.75 did): a run records its digest, and a resume that would train on
  # another gait than the run started with is refused, touching nothing.
  builtin = str(gait_tables.BUILTIN_TABLE)
  digest = hashlib.sha256(gait_tables.BUILTIN_TABLE.read_bytes()).hexdigest()

  def digests(env, *overrides):
    runner = OpenDuckMiniV2Runner(RunArgs(env=env, task="flat_terrain", preset="smoke", overrides=overrides))
    return configs.named_file_digests(runner.named_files(runner.resolve_config()))

  assert digests("joystick")[builtin] == digest
  assert builtin not in digests("standing")
  assert builtin not in digests("joystick", "reward_config.scales.imitation=0", "reference.feedforward=false")

  run_dir = fake_run(tmp_path / "run", steps=(1280,))
  record = json.loads((run_dir / "config.json").read_text())
  record["file_digests"] = {builtin: "0" * 64}
  (run_dir / "config.json").write_text(json.dumps(record))
  before = listing(tmp_path)
  result = run_cli("--output_dir", tmp_path, "--exp_name", "run", "--resume", timeout=300)
  assert_one_line_error(result, f"--resume: {builtin} changed since the run started")
  assert "--restore_checkpoint_path" in result.stderr
  assert listing(tmp_path) == before


def test_restore_mode_all_refuses_a_checkpoint_of_another_seed(tmp_path):
  fake_run(tmp_path / "src", seed=0)
  result = run_cli(
    "--preset", "smoke", "--output_dir", tmp_path / "out", "--exp_name", "x", "--seed", "1",
    "--restore_checkpoint_path", tmp_path / "src", timeout=300,
  )  # fmt: skip
  assert_one_line_error(result, "seed is 0 in the checkpoint but 1 in this run")
  assert "--allow_seed_change" in result.stderr and not (tmp_path / "out").exists()

  def check(saved, **flags):
    runner = OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain", preset="smoke", seed=1, **flags))
    compatibility.check_compat(saved, compatibility.config_fingerprint(runner, runner.resolve_config()), runner.args)

  with pytest.raises(RunError, match="seed is 0 in the checkpoint but 1"):
    check({"seed": 0})
  check({"seed": 0}, allow_seed_change=True)
  check({"env": "joystick"})  # written before the seed was part of the fingerprint


def test_list_shows_runs_without_importing_jax(tmp_path):
  out = tmp_path / "out"
  fake_run(out / "finished", steps=(1280, 2560), planned=2560)
  interrupted = fake_run(out / "stopped", steps=(1280,), planned=5120, env="standing")
  fake_run(out / "empty", steps=(), planned=2560)
  (out / "not_a_run").mkdir()
  with SummaryWriter(logdir=str(interrupted)) as writer:
    for step, value in ((0, 1.5), (1280, 2.25)):
      writer.add_scalar("eval/episode_reward", value, global_step=step)
    writer.add_scalar("episode/reward", 3.0, global_step=2560)
  code = (
    "import sys\n"
    "from playground.open_duck_mini_v2.runner import main\n"
    f"rc = main(['--list', '--output_dir', {str(out)!r}])\n"
    "assert 'jax' not in sys.modules, 'imported JAX'\n"
    "sys.exit(rc)\n"
  )
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert lines[0].split() == ["run", "env/task", "steps", "done/planned", "checkpoint", "eval", "return", "state"]
  rows = {line.split()[0]: line.split() for line in lines[1:]}
  assert set(rows) == {"empty", "finished", "stopped"}
  assert rows["finished"] == ["finished", "joystick/flat_terrain", "2,560/2,560", "2,560", "-", "finished"]
  assert rows["stopped"] == ["stopped", "standing/flat_terrain", "2,560/5,120", "1,280", "2.250", "interrupted"]
  assert rows["empty"] == ["empty", "joystick/flat_terrain", "0/2,560", "-", "-", "no", "checkpoint"]
  result = run_cli("--list", "--output_dir", tmp_path / "nowhere", timeout=120)
  assert_one_line_error(result, "is not a directory")


def test_presets_train_the_joystick_policy_as_a_residual_around_the_reference_gait():
  def feedforward(env, preset, *overrides):
    args = RunArgs(env=env, task="flat_terrain", preset=preset, overrides=list(overrides))
    config = OpenDuckMiniV2Runner(args).resolve_config().env_config
    return config.reference.feedforward if "reference" in config else None

  for preset in ("cpu", "quick", "full"):
    assert feedforward("joystick", preset) is True
  assert feedforward("joystick", "cpu", "reference.feedforward=false") is False
  assert feedforward("joystick", "smoke") is False  # the pipeline check keeps the plain action
  assert feedforward("standing", "cpu") is None


def test_walking_presets_narrow_the_trunk_com_offset_and_quick_keeps_the_robot_level():
  def com(env, preset, *overrides, key="com_offset"):
    args = RunArgs(env=env, task="flat_terrain", preset=preset, overrides=list(overrides))
    return OpenDuckMiniV2Runner(args).resolve_config().env_config.domain_randomization[key]

  assert com("joystick", "cpu") == pytest.approx(0.03)
  assert com("standing", "cpu") == pytest.approx(0.03)
  assert com("joystick", "cpu", "domain_randomization.com_offset=0.05") == pytest.approx(0.05)
  for preset in ("cpu", "full"):  # full is the cpu recipe at GPU scale
    assert com("joystick", preset) == pytest.approx(0.03)
    assert com("joystick", preset, key="com_offset_margin") == pytest.approx(0.005)  # trains at +-3.5 cm
  for preset in ("quick", "smoke"):
    assert com("joystick", preset) == pytest.approx(0.05)
    assert com("joystick", preset, key="com_offset_margin") == 0.0


def test_walking_presets_show_the_critic_the_randomized_physics_of_the_joystick_env_only():
  def critic_dynamics(env, preset, *overrides):
    args = RunArgs(env=env, task="flat_terrain", preset=preset, overrides=list(overrides))
    return OpenDuckMiniV2Runner(args).resolve_config().env_config.critic_dynamics

  assert critic_dynamics("joystick", "cpu") is True
  assert critic_dynamics("joystick", "cpu", "critic_dynamics=false") is False
  assert critic_dynamics("standing", "cpu") is False  # not measured there
  assert critic_dynamics("joystick", "full") is True  # the cpu recipe at GPU scale
  for preset in ("quick", "smoke"):
    assert critic_dynamics("joystick", preset) is False


def test_walking_presets_cost_leg_joints_near_their_range_ends_in_the_joystick_env_only():
  def scale(env, preset, *overrides):
    args = RunArgs(env=env, task="flat_terrain", preset=preset, overrides=list(overrides))
    return OpenDuckMiniV2Runner(args).resolve_config().env_config.reward_config.scales.get("dof_pos_limits")

  assert scale("joystick", "cpu") == -10.0
  assert scale("joystick", "full") == -10.0  # the cpu recipe at GPU scale
  assert scale("joystick", "cpu", "reward_config.scales.dof_pos_limits=0") == 0.0
  for preset in ("quick", "smoke"):
    assert scale("joystick", preset) == 0.0
  assert scale("standing", "cpu") is None  # the standing env has no such term; not measured there


def test_presets_that_train_a_walker_score_checkpoints_with_12_episodes_per_command():
  def seeds(preset, **extra):
    return OpenDuckMiniV2Runner(RunArgs(env="joystick", task="flat_terrain", preset=preset, extra=extra)).score_seeds()

  assert seeds("cpu") == 12 and seeds("full") == 12  # best_policy.onnx is chosen by this score
  assert seeds("quick") == 2 and seeds("smoke") == 2
  assert seeds("cpu", score_seeds=3) == 3


def test_walking_presets_charge_falls_and_the_others_keep_the_env_default():
  def termination(preset, *overrides):
    args = RunArgs(env="joystick", task="flat_terrain", preset=preset, overrides=list(overrides))
    return OpenDuckMiniV2Runner(args).resolve_config().env_config.reward_config.scales.termination

  assert termination("cpu") == pytest.approx(-200.0)
  assert termination("cpu", "reward_config.scales.termination=0") == 0.0
  assert termination("full") == pytest.approx(-200.0)  # the cpu recipe at GPU scale
  for preset in ("quick", "smoke"):
    assert termination(preset) == 0.0


def test_set_layer_sizes_takes_every_layer_given():
  # (A third layer was once dropped silently: the value was cut to the default's length.)
  def sizes(*overrides):
    args = RunArgs(env="joystick", task="flat_terrain", preset="cpu", overrides=list(overrides))
    ppo = OpenDuckMiniV2Runner(args).resolve_config().ppo_config
    return tuple(ppo.policy_hidden_layer_sizes), tuple(ppo.value_hidden_layer_sizes)

  assert sizes("ppo.policy_hidden_layer_sizes=(256,256,256)") == ((256, 256, 256), (256, 256))
  assert sizes("ppo.policy_hidden_layer_sizes=[64]", "ppo.value_hidden_layer_sizes=[512,256,128,64]") == (
    (64,),
    (512, 256, 128, 64),
  )
  for bad in ("[]", "(256,0)", "(256,1.5)", "256"):
    with pytest.raises(ConfigError, match="--set policy_hidden_layer_sizes: expected (a list|layer sizes)"):
      sizes(f"ppo.policy_hidden_layer_sizes={bad}")


def test_the_full_preset_warning_gives_minutes_for_short_runs_and_hours_for_long_ones():
  from playground.common.train.backend import duration_text

  assert duration_text(6_000_000 / 7000) == "14 min"  # a 6M-step fine-tune once read "about 0 h"
  assert duration_text(10) == "1 min"
  assert duration_text(150_000_000 / 7000) == "6 h"
