"""Robot-independent machinery: configs, rewards, randomization, PPO, runner."""
