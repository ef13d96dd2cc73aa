"""The Spark engine's handling of a session shared by threads, without Spark itself (a stand-in session)."""

from __future__ import annotations


def test_overlapping_statements_put_the_owners_shuffle_partitions_back_once() -> None:
    """Workers of ``dpsql serve`` share one Spark session: statements that overlap (A starts, B
    starts, A ends, B ends) leave the owner's spark.sql.shuffle.partitions as it was, not the
    value dpsql set (which a save and restore per statement would leave behind)."""
    from dpsql.backends.spark import SparkEngine

    class Conf(dict):
        def set(self, key, value):  # noqa: A003 - Spark's name
            self[key] = value

        def get(self, key):  # type: ignore[override]
            return self[key]

    session = type("Session", (), {"conf": Conf({"spark.sql.shuffle.partitions": "200"})})()
    a, b = SparkEngine(session), SparkEngine(session)
    a.shuffle_partitions = b.shuffle_partitions = 2
    first, second = a._partitions(), b._partitions()
    first.__enter__()
    second.__enter__()
    assert session.conf["spark.sql.shuffle.partitions"] == "2"
    first.__exit__(None, None, None)
    assert session.conf["spark.sql.shuffle.partitions"] == "2"  # B still runs
    second.__exit__(None, None, None)
    assert session.conf["spark.sql.shuffle.partitions"] == "200"
