"""The query language: text to a bound query. Reads no data."""
