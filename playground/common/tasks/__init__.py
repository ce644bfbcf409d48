"""Building blocks of a robot's tasks: rewards, randomization, reference motion, observation
layouts, mirror symmetry and MJCF helpers."""
