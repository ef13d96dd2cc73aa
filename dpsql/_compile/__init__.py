"""The statistics statement as a typed plan, compiled by sqlglot for each engine.

:mod:`dpsql._compile.plan` holds what the statement is made of (built from the planner's
:class:`~dpsql._plan.plan.Plan` by :func:`dpsql._plan.rewrite.statement`);
:mod:`dpsql._compile.compiler` turns it into one sqlglot tree (DuckDB's form), and
:mod:`dpsql._compile.spark` into Spark's. Each rewrite rule is a module of its own, with a
fixture file of plan → SQL pairs in ``fixtures/compile/``: :mod:`~dpsql._compile.source`,
:mod:`~dpsql._compile.clip`, :mod:`~dpsql._compile.truncate`, :mod:`~dpsql._compile.histogram`,
:mod:`~dpsql._compile.keyjoin`, :mod:`~dpsql._compile.inline`, :mod:`~dpsql._compile.domain`.
"""
