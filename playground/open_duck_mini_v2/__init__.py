"""Open Duck Mini V2: model, tasks, randomization and training runner."""
