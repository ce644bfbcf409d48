"""The Open Duck Mini V2's tasks: the base env, joystick, standing, the reference gait, the task table."""
