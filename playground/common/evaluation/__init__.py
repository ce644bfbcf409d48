"""Evaluation any robot shares: the generic player, the scorecard's arithmetic and the run's best policy."""
