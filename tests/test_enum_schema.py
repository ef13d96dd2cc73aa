"""An ENUM column's type lists its values, and dpsql shows the schema: a private table's ENUM
column must have its values declared as public keys, or the connection is refused (its values
are often made from the data: ``CREATE TYPE dx AS ENUM (SELECT DISTINCT diag FROM people)``)."""

from __future__ import annotations

import duckdb
import pytest

import dpsql


def _setup(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE people (name VARCHAR, diag VARCHAR, age INTEGER)")
    con.execute("INSERT INTO people VALUES ('a', 'HIV', 30), ('b', 'flu', 40), ('c', 'flu', 50)")
    con.execute("CREATE TYPE dx AS ENUM (SELECT DISTINCT diag FROM people ORDER BY diag)")
    con.execute("CREATE TABLE p AS SELECT name, CAST(diag AS dx) AS diag, age FROM people")
    con.execute("DROP TABLE people")


def _policy(diag: dict | None = None, public: bool = False) -> dict:
    columns = {"age": {"lower": 0, "upper": 100}, **({"diag": diag} if diag is not None else {})}
    table = {"public": True} if public else {"privacy_unit": "row", "columns": columns}
    return {"budget": {"epsilon": 1e7, "delta": 1e-6}, "tables": {"p": table}}


def test_a_private_enum_column_without_keys_is_refused_before_anything_is_shown() -> None:
    with pytest.raises(dpsql.PolicyError, match="column diag is an ENUM") as err:
        dpsql.connect(":memory:", _policy(), setup=_setup)
    assert "HIV" not in str(err.value) and "flu" not in str(err.value)


def test_an_enum_column_with_public_keys_or_of_a_public_table_is_accepted() -> None:
    con = dpsql.connect(":memory:", _policy({"keys": ["HIV", "flu"]}), setup=_setup)
    rows = dict(con.sql("SELECT diag, DP_COUNT(*) FROM p GROUP BY diag WITH (epsilon = 1e6)").fetchall())
    assert set(rows) == {"HIV", "flu"} and round(rows["flu"]) == 2
    assert "ENUM" in str(con.sql("DESCRIBE p"))
    con.close()
    dpsql.connect(":memory:", _policy(public=True), setup=_setup).close()
