"""Planning: a mechanism per DP aggregate, the budget split, public key domains, and the
plan's typed statistics statement, compiled for the backend. Reads no data."""
