"""Playing and judging a policy: the robot runtime's loop, the player, the scorecard, the robot's logs."""
