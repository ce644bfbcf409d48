"""duck-playground: reinforcement learning for small legged robots on MuJoCo MJX."""

__version__ = "0.1.0"
