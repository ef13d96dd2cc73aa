"""A Python program that uses dpsql over Spark Connect as a user would, for tests/test_spark_connect.py.

    python tests/spark_connect_client.py PROGRAM RESULT

It runs in a fresh interpreter because pyspark allows one kind of session per process (a
Spark Connect session turns the process's pyspark into Connect mode), and the test process
holds the classic ``local[2]`` session of the other spark-marked tests.

PROGRAM (a pickle) gives ``url``, ``views`` (name → Parquet file, made temporary views through
the client), ``sql`` (statements run on the session first), ``connections`` (name → policy)
and ``steps``, each ``(kind, connection, query)`` with kind ``statistics`` (the exact statistics
of the plan: column names and rows), ``sql`` (the released rows) or ``prepare``. RESULT (a
pickle) holds, for each step, ``("ok", value)`` or ``("error", class name, message)``, and for
each connection its engine's name, its shuffle partitions and the ε it spent.
"""

from __future__ import annotations

import pickle
import sys
import typing as t


def run_step(con: t.Any, kind: str, query: str) -> t.Any:
    if kind == "statistics":
        prepared = con.prepare(query)
        return con.engine.statistics(prepared.sql)
    if kind == "sql":
        return con.sql(query).table.to_pylist()
    con.prepare(query)
    return None


def main(program_path: str, result_path: str) -> None:
    from pyspark.sql import SparkSession

    import dpsql

    with open(program_path, "rb") as fh:
        program = pickle.load(fh)
    session = SparkSession.builder.remote(program["url"]).getOrCreate()
    try:
        for name, path in program["views"].items():
            session.read.parquet(path).createOrReplaceTempView(name)
        for statement in program["sql"]:
            session.sql(statement)
        connections = {name: dpsql.connect(session, policy) for name, policy in program["connections"].items()}
        steps = []
        for kind, name, query in program["steps"]:
            try:
                steps.append(("ok", run_step(connections[name], kind, query)))
            except dpsql.Error as err:
                steps.append(("error", type(err).__name__, str(err)))
        about = {name: (con.engine.name, con.engine.shuffle_partitions, con.budget.spent.epsilon)
                 for name, con in connections.items()}
        for con in connections.values():
            con.close()
    finally:
        session.stop()
    with open(result_path, "wb") as fh:
        pickle.dump({"steps": steps, "connections": about}, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
