"""MuJoCo Playground's cartpole tasks, as a minutes-long pipeline check."""
