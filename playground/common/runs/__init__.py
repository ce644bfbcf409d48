"""Run management, without JAX: flags, run directories and records, resume, compatibility, checkpoints."""
