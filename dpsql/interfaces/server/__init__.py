"""``dpsql serve``: the PostgreSQL wire protocol in front of dpsql (on the pg_mimic library).

Modules: ``main`` (the command), ``session`` (protocol glue: every statement goes through
dpsql), ``utility`` (SET, SHOW, transactions and the other session statements, on sqlglot's
tokens), ``cursors`` (DECLARE, FETCH, MOVE, CLOSE), ``catalog`` (catalog queries answered from
the policy), ``pgtables`` (the pg_catalog and information_schema relations), ``scratch`` (the
in-memory DuckDB that holds them), ``pgrewrite`` (a client's catalog query, spelled for it),
``pgfunctions`` (the catalog and session functions in it), ``columns`` (result columns and
types from the plan), ``params`` (bound parameters inlined through the syntax tree), ``users``
(SCRAM-SHA-256 verifiers and budget shares), ``security`` (TLS, login throttling) and ``pool``
(the worker threads).
"""
