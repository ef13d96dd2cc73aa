"""``dpsql serve``: the PostgreSQL wire protocol in front of dpsql (on the pg_mimic library).

Modules: ``main`` (the command), ``session`` (protocol glue: every statement goes through
dpsql), ``catalog`` (catalog queries answered from the policy), ``columns`` (result columns and
types from the plan), ``params`` (bound parameters inlined through the syntax tree), ``users``
(SCRAM-SHA-256 verifiers and budget shares) and ``pool`` (the worker threads).
"""
