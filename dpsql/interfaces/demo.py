"""The bundled demo: an in-memory DuckDB with the UCI Adult table and its policy."""

from __future__ import annotations

from importlib import resources

import duckdb

from dpsql._privacy.noise import NoiseSource
from dpsql.connection import Connection, connect

EDUCATION_LEVELS = [
    (1, "Preschool"), (2, "1st-4th"), (3, "5th-6th"), (4, "7th-8th"), (5, "9th"), (6, "10th"),
    (7, "11th"), (8, "12th"), (9, "HS-grad"), (10, "Some-college"), (11, "Assoc-voc"),
    (12, "Assoc-acdm"), (13, "Bachelors"), (14, "Masters"), (15, "Prof-school"), (16, "Doctorate"),
]


def load_adult(con: duckdb.DuckDBPyConnection) -> None:
    """Create table ``adult`` (private) and ``education_levels`` (public) on ``con``."""
    path = resources.files("dpsql") / "data" / "adult.parquet"
    with resources.as_file(path) as parquet:
        con.execute("CREATE TABLE adult AS SELECT * FROM read_parquet(?)", [str(parquet)])
    con.execute("CREATE TABLE education_levels (education_num INTEGER, education VARCHAR)")
    con.executemany("INSERT INTO education_levels VALUES (?, ?)", EDUCATION_LEVELS)


def demo_policy_path() -> str:
    return str(resources.files("dpsql") / "data" / "adult.toml")


def connect_demo(noise: NoiseSource | None = None) -> Connection:
    """An in-memory DP connection on the Adult demo data with the bundled policy."""
    return connect(":memory:", demo_policy_path(), noise=noise, setup=load_adult)
