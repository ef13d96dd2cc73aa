"""One query end to end: prepare and release (the seam), zero-row probes, Ctrl-C."""
