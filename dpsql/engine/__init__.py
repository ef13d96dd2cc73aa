"""Planning, the rewrite into one statistics query, and the release."""
