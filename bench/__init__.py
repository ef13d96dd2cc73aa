"""Benchmarks of dpsql: speed against DuckDB and other DP systems, accuracy on Adult.

Run ``python bench/run.py --all`` (or ``python -m bench --all``); see :mod:`bench.run`.
"""
