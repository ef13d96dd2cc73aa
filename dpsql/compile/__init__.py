"""The statistics statement as a typed plan, compiled by sqlglot for each engine.

:mod:`dpsql.compile.plan` holds what the statement is made of (built from the planner's
:class:`~dpsql.engine.plan.Plan` by :func:`dpsql.engine.rewrite.statement`);
:mod:`dpsql.compile.compiler` turns it into one sqlglot tree (DuckDB's form), and
:mod:`dpsql.compile.spark` into Spark's. Each rewrite rule is a module of its own, with a
fixture file of plan → SQL pairs in ``fixtures/compile/``: :mod:`~dpsql.compile.source`,
:mod:`~dpsql.compile.clip`, :mod:`~dpsql.compile.truncate`, :mod:`~dpsql.compile.histogram`,
:mod:`~dpsql.compile.keyjoin`, :mod:`~dpsql.compile.inline`, :mod:`~dpsql.compile.domain`.
"""
