"""Statistical privacy audit of dpsql's mechanisms (see harness.py and docs/testing.md)."""
