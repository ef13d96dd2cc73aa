"""After the charge: every mechanism's noisy release, thresholds, bounds found privately."""
