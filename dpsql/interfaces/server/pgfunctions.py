"""Catalog and session functions in a catalog query, and what each becomes on the scratch
catalog (:mod:`.scratch`): a value of the connection, a constant (NULL, 0, true) for what the
emulation does not model, or a call of one of the scratch catalog's macros."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

from sqlglot import exp

from .pgtables import SCHEMAS


class Unanswerable(Exception):
    """A catalog query the scratch catalog cannot answer (it names a relation not emulated)."""


@dataclass
class Context:
    """What the connection knows: its user and database, its process id, its settings."""

    user: str
    database: str
    pid: int = 0
    settings: t.Callable[[str], str] = lambda name: ""
    version: str = "PostgreSQL 16.0 (dpsql)"
    #: what ``set_config(...)`` calls in the query do when it runs
    effects: list[tuple[str, str | None]] = field(default_factory=list)


SESSION_CLASSES = (exp.CurrentVersion, exp.CurrentUser, exp.SessionUser, exp.CurrentSchema, exp.CurrentSchemas,
                    exp.CurrentDatabase, exp.CurrentCatalog)
_TRUE = {"pg_table_is_visible", "pg_type_is_visible", "pg_function_is_visible", "pg_collation_is_visible",
         "pg_opclass_is_visible", "pg_operator_is_visible", "pg_conversion_is_visible", "pg_opfamily_is_visible",
         "pg_statistics_obj_is_visible", "pg_ts_config_is_visible", "pg_ts_dict_is_visible",
         "pg_ts_parser_is_visible", "pg_ts_template_is_visible", "has_table_privilege", "has_schema_privilege",
         "has_database_privilege", "has_column_privilege", "has_any_column_privilege", "has_function_privilege",
         "has_sequence_privilege", "has_type_privilege", "has_tablespace_privilege", "pg_has_role"}
_FALSE = {"pg_is_in_recovery", "pg_is_other_temp_schema", "pg_relation_is_publishable"}
_NULL = {"pg_get_expr", "pg_get_constraintdef", "pg_get_indexdef", "pg_get_viewdef", "pg_get_triggerdef",
         "pg_get_ruledef", "pg_get_function_result", "pg_get_function_arguments", "pg_get_functiondef",
         "pg_get_function_identity_arguments", "pg_get_serial_sequence", "pg_get_partkeydef",
         "pg_get_statisticsobjdef", "pg_get_statisticsobjdef_columns", "pg_get_partition_constraintdef",
         "obj_description", "col_description", "shobj_description", "pg_tablespace_location",
         "inet_server_addr", "inet_server_port", "inet_client_addr", "inet_client_port", "pg_get_publication_tables"}
_ZERO = {"pg_relation_size", "pg_total_relation_size", "pg_table_size", "pg_indexes_size", "pg_database_size",
         "pg_tablespace_size"}
#: functions the scratch catalog defines as macros
MACROS = {"format_type", "to_regtype", "to_regclass", "to_regnamespace", "quote_ident", "array_upper",
          "array_lower", "_pg_expandarray", "pg_get_keywords"}
_OTHER = {"current_setting", "set_config", "pg_backend_pid", "version", "pg_get_userbyid", "pg_size_pretty",
          "pg_encoding_to_char", "pg_char_to_encoding", "json_build_object", "txid_current", "pg_current_xact_id"}
#: a table-less query calling one of these is a catalog query
FUNCTIONS = _TRUE | _FALSE | _NULL | _ZERO | MACROS | _OTHER
REG_TYPES = {"regclass", "regtype", "regproc", "regprocedure", "regnamespace", "regrole", "regoper",
              "regoperator", "regconfig", "regdictionary", "regcollation"}


def function_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return None


def macro(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Dot(this=exp.to_identifier(SCHEMAS["pg_catalog"]), expression=exp.Anonymous(this=name, expressions=list(args)))


def is_macro(node: exp.Expression) -> bool:
    """A call of a scratch catalog macro (this rewrite made it)."""
    parent = node.parent
    return isinstance(parent, exp.Dot) and isinstance(parent.this, exp.Identifier) \
        and parent.this.name == SCHEMAS["pg_catalog"]


def session_value(node: exp.Expr, ctx: Context) -> exp.Expr | None:
    if isinstance(node, exp.CurrentVersion):
        return exp.Literal.string(ctx.version)
    if isinstance(node, (exp.CurrentUser, exp.SessionUser)):
        return exp.Literal.string(ctx.user)
    if isinstance(node, (exp.CurrentDatabase, exp.CurrentCatalog)):
        return exp.Literal.string(ctx.database)
    if isinstance(node, exp.CurrentSchema):
        return exp.Literal.string("public")
    if isinstance(node, exp.CurrentSchemas):
        implicit = isinstance(node.this, exp.Boolean) and node.this.this
        return exp.Array(expressions=[exp.Literal.string(s) for s in (["pg_catalog"] if implicit else []) + ["public"]])
    if is_user(node):
        return exp.Literal.string(ctx.user)
    return None


def is_user(node: exp.Expr) -> bool:
    """``user`` / ``current_role``, which sqlglot reads as a column."""
    return isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier) \
        and not node.this.quoted and node.name.lower() in ("user", "current_role")


#: functions answered with a fixed value, or a value of the connection
_VALUES: dict[str, t.Callable[[Context], exp.Expression]] = {
    **{name: lambda ctx: exp.true() for name in _TRUE},
    **{name: lambda ctx: exp.false() for name in _FALSE},
    **{name: lambda ctx: exp.null() for name in _NULL},
    **{name: lambda ctx: exp.Literal.number(0) for name in _ZERO},
    "version": lambda ctx: exp.Literal.string(ctx.version),
    "pg_get_userbyid": lambda ctx: exp.Literal.string(ctx.user),
    "pg_backend_pid": lambda ctx: exp.Literal.number(ctx.pid),
    "txid_current": lambda ctx: exp.Literal.number(1),
    "pg_current_xact_id": lambda ctx: exp.Literal.number(1),
    "pg_size_pretty": lambda ctx: exp.Literal.string("0 bytes"),
    "pg_encoding_to_char": lambda ctx: exp.Literal.string("UTF8"),
    "pg_char_to_encoding": lambda ctx: exp.Literal.number(6),
}


def call(node: exp.Anonymous, name: str, ctx: Context) -> exp.Expression | None:
    """What the call ``name(...)`` becomes, or None to leave it as it is."""
    args = node.expressions
    if name.startswith("has_") and name.endswith("_privilege") and args and isinstance(args[-1], exp.Literal):
        # the server only reads: SELECT, USAGE and CONNECT are granted, writes are not
        wanted = str(args[-1].this).lower()
        return exp.true() if any(p in wanted for p in ("select", "usage", "connect")) else exp.false()
    if name in _VALUES:
        return _VALUES[name](ctx)
    if name in MACROS:
        return macro(name, *[a.copy() for a in args])
    if name == "json_build_object":
        return exp.Anonymous(this="json_object", expressions=[a.copy() for a in args])
    if name == "current_setting" and args and isinstance(args[0], exp.Literal):
        return exp.Literal.string(ctx.settings(str(args[0].this).lower()))
    if name == "set_config" and len(args) >= 2 and isinstance(args[0], exp.Literal):
        value = args[1]
        if not isinstance(value, (exp.Null, exp.Literal)):
            raise Unanswerable("set_config with a value that is not a literal")
        text = None if isinstance(value, exp.Null) else str(value.this)
        ctx.effects.append((str(args[0].this).lower(), text))
        return exp.Literal.string(text or "")
    return None


__all__ = ["FUNCTIONS", "MACROS", "REG_TYPES", "SESSION_CLASSES", "Context", "call", "function_name", "is_macro",
           "is_user", "macro", "session_value", "Unanswerable"]
