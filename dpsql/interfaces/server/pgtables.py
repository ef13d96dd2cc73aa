"""The catalog a PostgreSQL client reads, as tables in a scratch DuckDB that holds nothing else.

``pg_catalog`` (``pg_class``, ``pg_attribute``, ``pg_type``, ``pg_namespace``, ...) and
``information_schema`` (``tables``, ``columns``, ...) are built from the declared tables only:
their names, their columns and the PostgreSQL types of those columns. Nothing here is read from
the data. Relations PostgreSQL fills with indexes, constraints, defaults, comments, functions,
sequences and the like exist with their columns and no rows (there are none to report).

This module says what the relations are (their columns and types, and the PostgreSQL types
the catalog knows); :mod:`.scratch` builds them in a scratch DuckDB and fills them in. A few
relations depend on the connection (the user's role, the database name a client connected to):
their columns marked ``@user`` / ``@db`` are filled in per connection.
"""

from __future__ import annotations

import typing as t

#: the schemas the scratch DuckDB holds, by the PostgreSQL schema they stand for
SCHEMAS = {"pg_catalog": "dpsql_pg_catalog", "information_schema": "dpsql_information_schema"}
PG_CATALOG, INFORMATION_SCHEMA, PUBLIC = 11, 13183, 2200
FIRST_TABLE = 16384
TEXT_COLLATION = 100

# oid, name, length, category, array oid, the name format_type() gives
TYPES = [
    (16, "bool", 1, "B", 1000, "boolean"), (17, "bytea", -1, "U", 1001, "bytea"),
    (18, "char", 1, "Z", 1002, '"char"'), (19, "name", 64, "S", 1003, "name"),
    (20, "int8", 8, "N", 1016, "bigint"), (21, "int2", 2, "N", 1005, "smallint"),
    (22, "int2vector", -1, "A", 1006, "int2vector"), (23, "int4", 4, "N", 1007, "integer"),
    (24, "regproc", 4, "N", 1008, "regproc"), (25, "text", -1, "S", 1009, "text"),
    (26, "oid", 4, "N", 1028, "oid"), (30, "oidvector", -1, "A", 1013, "oidvector"),
    (114, "json", -1, "U", 199, "json"), (142, "xml", -1, "U", 143, "xml"),
    (700, "float4", 4, "N", 1021, "real"), (701, "float8", 8, "N", 1022, "double precision"),
    (705, "unknown", -2, "X", 0, "unknown"), (1042, "bpchar", -1, "S", 1014, "character"),
    (1043, "varchar", -1, "S", 1015, "character varying"), (1082, "date", 4, "D", 1182, "date"),
    (1083, "time", 8, "D", 1183, "time without time zone"),
    (1114, "timestamp", 8, "D", 1115, "timestamp without time zone"),
    (1184, "timestamptz", 8, "D", 1185, "timestamp with time zone"),
    (1186, "interval", 16, "T", 1187, "interval"), (1266, "timetz", 12, "D", 1270, "time with time zone"),
    (1560, "bit", -1, "V", 1561, "bit"), (1562, "varbit", -1, "V", 1563, "bit varying"),
    (1700, "numeric", -1, "N", 1231, "numeric"), (2205, "regclass", 4, "N", 2210, "regclass"),
    (2206, "regtype", 4, "N", 2211, "regtype"), (2249, "record", -1, "P", 2287, "record"),
    (2275, "cstring", -2, "P", 1263, "cstring"), (2278, "void", 4, "P", 0, "void"),
    (2950, "uuid", 16, "U", 2951, "uuid"), (3802, "jsonb", -1, "U", 3807, "jsonb"),
    (4089, "regnamespace", 4, "N", 4090, "regnamespace"), (4096, "regrole", 4, "N", 4097, "regrole"),
]
#: type OID → its name in pg_type
TYPE_NAMES = {oid: name for oid, name, *_ in TYPES}
#: type OID → the name format_type() and information_schema give it
DISPLAY_NAMES = {oid: shown for oid, _, _, _, _, shown in TYPES}
PSEUDO = {"unknown", "record", "cstring", "void"}


def column_specs(spec: str) -> list[tuple[str, str, t.Any]]:
    """``"oid INTEGER, nspname VARCHAR, nspowner INTEGER = 10"`` → (name, type, default)."""
    out = []
    for part in spec.split(","):
        declared, _, default = part.partition("=")
        name, dtype = declared.split(None, 1)
        value = default.strip()
        out.append((name, dtype.strip(), None if not value else {"true": True, "false": False}.get(value, value)))
    return out


#: pg_catalog relations: their columns ("name TYPE [= default]"); "@user" / "@db" mark the
#: columns a connection fills in (the relation is then a table macro of the user and database)
PG = {
    "pg_namespace": "oid INTEGER, nspname VARCHAR, nspowner INTEGER = 10, nspacl VARCHAR[]",
    "pg_class": (
        "oid INTEGER, relname VARCHAR, relnamespace INTEGER = 2200, reltype INTEGER = 0, reloftype INTEGER = 0, "
        "relowner INTEGER = 10, relam INTEGER = 2, relfilenode INTEGER = 0, reltablespace INTEGER = 0, "
        "relpages INTEGER = 0, reltuples REAL = -1, relallvisible INTEGER = 0, reltoastrelid INTEGER = 0, "
        "relhasindex BOOLEAN = false, relisshared BOOLEAN = false, relpersistence VARCHAR = 'p', "
        "relkind VARCHAR = 'r', relnatts SMALLINT = 0, relchecks SMALLINT = 0, relhasrules BOOLEAN = false, "
        "relhastriggers BOOLEAN = false, relhassubclass BOOLEAN = false, relrowsecurity BOOLEAN = false, "
        "relforcerowsecurity BOOLEAN = false, relispopulated BOOLEAN = true, relreplident VARCHAR = 'd', "
        "relispartition BOOLEAN = false, relrewrite INTEGER = 0, relfrozenxid INTEGER = 0, relminmxid INTEGER = 0, "
        "relacl VARCHAR[], reloptions VARCHAR[], relpartbound VARCHAR"),
    "pg_attribute": (
        "attrelid INTEGER, attname VARCHAR, atttypid INTEGER, attstattarget INTEGER = -1, attlen SMALLINT, "
        "attnum SMALLINT, attndims INTEGER = 0, attcacheoff INTEGER = -1, atttypmod INTEGER = -1, "
        "attbyval BOOLEAN, attalign VARCHAR = 'i', attstorage VARCHAR = 'p', attcompression VARCHAR = '', "
        "attnotnull BOOLEAN = false, atthasdef BOOLEAN = false, atthasmissing BOOLEAN = false, "
        "attidentity VARCHAR = '', attgenerated VARCHAR = '', attisdropped BOOLEAN = false, "
        "attislocal BOOLEAN = true, attinhcount INTEGER = 0, attcollation INTEGER = 0, attacl VARCHAR[], "
        "attoptions VARCHAR[], attfdwoptions VARCHAR[], attmissingval VARCHAR"),
    "pg_type": (
        "oid INTEGER, typname VARCHAR, typnamespace INTEGER = 11, typowner INTEGER = 10, typlen SMALLINT, "
        "typbyval BOOLEAN, typtype VARCHAR = 'b', typcategory VARCHAR, typispreferred BOOLEAN = false, "
        "typisdefined BOOLEAN = true, typdelim VARCHAR, typrelid INTEGER = 0, typsubscript VARCHAR = '-', "
        "typelem INTEGER = 0, typarray INTEGER = 0, typinput VARCHAR, typoutput VARCHAR, typreceive VARCHAR, "
        "typsend VARCHAR, typmodin VARCHAR = '-', typmodout VARCHAR = '-', typanalyze VARCHAR = '-', "
        "typalign VARCHAR = 'i', typstorage VARCHAR = 'p', typnotnull BOOLEAN = false, typbasetype INTEGER = 0, "
        "typtypmod INTEGER = -1, typndims INTEGER = 0, typcollation INTEGER = 0, typdefaultbin VARCHAR, "
        "typdefault VARCHAR, typacl VARCHAR[]"),
    "pg_am": "oid INTEGER, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR",
    "pg_attrdef": "oid INTEGER, adrelid INTEGER, adnum SMALLINT, adbin VARCHAR",
    "pg_constraint": (
        "oid INTEGER, conname VARCHAR, connamespace INTEGER, contype VARCHAR, condeferrable BOOLEAN, "
        "condeferred BOOLEAN, convalidated BOOLEAN, conrelid INTEGER, contypid INTEGER, conindid INTEGER, "
        "conparentid INTEGER, confrelid INTEGER, confupdtype VARCHAR, confdeltype VARCHAR, confmatchtype VARCHAR, "
        "conislocal BOOLEAN, coninhcount INTEGER, connoinherit BOOLEAN, conkey SMALLINT[], confkey SMALLINT[], "
        "conpfeqop INTEGER[], conppeqop INTEGER[], conffeqop INTEGER[], confdelsetcols SMALLINT[], "
        "conexclop INTEGER[], conbin VARCHAR"),
    "pg_index": (
        "indexrelid INTEGER, indrelid INTEGER, indnatts SMALLINT, indnkeyatts SMALLINT, indisunique BOOLEAN, "
        "indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, indisexclusion BOOLEAN, indimmediate BOOLEAN, "
        "indisclustered BOOLEAN, indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN, indislive BOOLEAN, "
        "indisreplident BOOLEAN, indkey SMALLINT[], indcollation INTEGER[], indclass INTEGER[], "
        "indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR"),
    "pg_description": "objoid INTEGER, classoid INTEGER, objsubid INTEGER, description VARCHAR",
    "pg_shdescription": "objoid INTEGER, classoid INTEGER, description VARCHAR",
    "pg_collation": (
        "oid INTEGER, collname VARCHAR, collnamespace INTEGER, collowner INTEGER, collprovider VARCHAR, "
        "collisdeterministic BOOLEAN, collencoding INTEGER, collcollate VARCHAR, collctype VARCHAR, "
        "colliculocale VARCHAR, collversion VARCHAR"),
    "pg_inherits": "inhrelid INTEGER, inhparent INTEGER, inhseqno INTEGER, inhdetachpending BOOLEAN",
    "pg_rewrite": (
        "oid INTEGER, rulename VARCHAR, ev_class INTEGER, ev_type VARCHAR, ev_enabled VARCHAR, "
        "is_instead BOOLEAN, ev_qual VARCHAR, ev_action VARCHAR"),
    "pg_trigger": (
        "oid INTEGER, tgrelid INTEGER, tgparentid INTEGER, tgname VARCHAR, tgfoid INTEGER, tgtype SMALLINT, "
        "tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid INTEGER, tgconstrindid INTEGER, "
        "tgconstraint INTEGER, tgdeferrable BOOLEAN, tginitdeferred BOOLEAN, tgnargs SMALLINT, "
        "tgattr SMALLINT[], tgargs VARCHAR, tgqual VARCHAR, tgoldtable VARCHAR, tgnewtable VARCHAR"),
    "pg_policy": (
        "oid INTEGER, polname VARCHAR, polrelid INTEGER, polcmd VARCHAR, polpermissive BOOLEAN, "
        "polroles INTEGER[], polqual VARCHAR, polwithcheck VARCHAR"),
    "pg_statistic_ext": (
        "oid INTEGER, stxrelid INTEGER, stxname VARCHAR, stxnamespace INTEGER, stxowner INTEGER, "
        "stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR"),
    "pg_proc": (
        "oid INTEGER, proname VARCHAR, pronamespace INTEGER, proowner INTEGER, prolang INTEGER, procost REAL, "
        "prorows REAL, provariadic INTEGER, prosupport VARCHAR, prokind VARCHAR, prosecdef BOOLEAN, "
        "proleakproof BOOLEAN, proisstrict BOOLEAN, proretset BOOLEAN, provolatile VARCHAR, proparallel VARCHAR, "
        "pronargs SMALLINT, pronargdefaults SMALLINT, prorettype INTEGER, proargtypes INTEGER[], "
        "proallargtypes INTEGER[], proargmodes VARCHAR[], proargnames VARCHAR[], proargdefaults VARCHAR, "
        "protrftypes INTEGER[], prosrc VARCHAR, probin VARCHAR, prosqlbody VARCHAR, proconfig VARCHAR[], "
        "proacl VARCHAR[]"),
    "pg_language": "oid INTEGER, lanname VARCHAR, lanowner INTEGER, lanispl BOOLEAN, lanpltrusted BOOLEAN",
    "pg_opclass": (
        "oid INTEGER, opcmethod INTEGER, opcname VARCHAR, opcnamespace INTEGER, opcowner INTEGER, "
        "opcfamily INTEGER, opcintype INTEGER, opcdefault BOOLEAN, opckeytype INTEGER"),
    "pg_enum": "oid INTEGER, enumtypid INTEGER, enumsortorder REAL, enumlabel VARCHAR",
    "pg_range": "rngtypid INTEGER, rngsubtype INTEGER, rngmultitypid INTEGER, rngcollation INTEGER",
    "pg_sequence": (
        "seqrelid INTEGER, seqtypid INTEGER, seqstart BIGINT, seqincrement BIGINT, seqmax BIGINT, "
        "seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN"),
    "pg_depend": (
        "classid INTEGER, objid INTEGER, objsubid INTEGER, refclassid INTEGER, refobjid INTEGER, "
        "refobjsubid INTEGER, deptype VARCHAR"),
    "pg_extension": (
        "oid INTEGER, extname VARCHAR, extowner INTEGER, extnamespace INTEGER, extrelocatable BOOLEAN, "
        "extversion VARCHAR, extconfig INTEGER[], extcondition VARCHAR[]"),
    "pg_foreign_table": "ftrelid INTEGER, ftserver INTEGER, ftoptions VARCHAR[]",
    "pg_partitioned_table": "partrelid INTEGER, partstrat VARCHAR, partnatts SMALLINT, partdefid INTEGER",
    "pg_event_trigger": "oid INTEGER, evtname VARCHAR, evtevent VARCHAR, evtowner INTEGER, evtenabled VARCHAR",
    "pg_publication": "oid INTEGER, pubname VARCHAR, pubowner INTEGER, puballtables BOOLEAN",
    "pg_publication_rel": "oid INTEGER, prpubid INTEGER, prrelid INTEGER, prqual VARCHAR, prattrs SMALLINT[]",
    "pg_publication_namespace": "oid INTEGER, pnpubid INTEGER, pnnspid INTEGER",
    "pg_subscription": "oid INTEGER, subname VARCHAR, subowner INTEGER, subenabled BOOLEAN",
    "pg_tablespace": "oid INTEGER, spcname VARCHAR, spcowner INTEGER = 10, spcacl VARCHAR[], spcoptions VARCHAR[]",
    "pg_settings": (
        "name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR, extra_desc VARCHAR, "
        "context VARCHAR = 'user', vartype VARCHAR = 'string', source VARCHAR = 'default', min_val VARCHAR, "
        "max_val VARCHAR, enumvals VARCHAR[], boot_val VARCHAR, reset_val VARCHAR, sourcefile VARCHAR, "
        "sourceline INTEGER, pending_restart BOOLEAN = false"),
    "pg_views": "schemaname VARCHAR, viewname VARCHAR, viewowner VARCHAR, definition VARCHAR",
    "pg_matviews": (
        "schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, tablespace VARCHAR, "
        "hasindexes BOOLEAN, ispopulated BOOLEAN, definition VARCHAR"),
    "pg_indexes": "schemaname VARCHAR, tablename VARCHAR, indexname VARCHAR, tablespace VARCHAR, indexdef VARCHAR",
    "pg_sequences": (
        "schemaname VARCHAR, sequencename VARCHAR, sequenceowner VARCHAR, data_type VARCHAR, start_value BIGINT, "
        "min_value BIGINT, max_value BIGINT, increment_by BIGINT, cycle BOOLEAN, cache_size BIGINT, "
        "last_value BIGINT"),
    "pg_cursors": (
        "name VARCHAR, statement VARCHAR, is_holdable BOOLEAN, is_binary BOOLEAN, is_scrollable BOOLEAN, "
        "creation_time TIMESTAMP"),
    "pg_prepared_statements": "name VARCHAR, statement VARCHAR, parameter_types VARCHAR[], from_sql BOOLEAN",
    "pg_auth_members": "oid INTEGER, roleid INTEGER, member INTEGER, grantor INTEGER, admin_option BOOLEAN",
    "pg_stat_activity": (
        "datid INTEGER, datname VARCHAR, pid INTEGER, usename VARCHAR, application_name VARCHAR, "
        "client_addr VARCHAR, backend_start TIMESTAMP, state VARCHAR, query VARCHAR"),
    "pg_locks": "locktype VARCHAR, database INTEGER, relation INTEGER, pid INTEGER, mode VARCHAR, granted BOOLEAN",
    **{view: ("relid INTEGER, schemaname VARCHAR, relname VARCHAR, seq_scan BIGINT, idx_scan BIGINT, n_live_tup BIGINT, "
              "n_dead_tup BIGINT, last_analyze TIMESTAMP, last_autoanalyze TIMESTAMP")
       for view in ("pg_stat_user_tables", "pg_stat_all_tables")},
    "pg_tables": (
        "schemaname VARCHAR, tablename VARCHAR, tableowner VARCHAR @user, tablespace VARCHAR, "
        "hasindexes BOOLEAN = false, hasrules BOOLEAN = false, hastriggers BOOLEAN = false, "
        "rowsecurity BOOLEAN = false"),
    "pg_roles": (
        "rolname VARCHAR @user, rolsuper BOOLEAN = false, rolinherit BOOLEAN = true, rolcreaterole BOOLEAN = false, "
        "rolcreatedb BOOLEAN = false, rolcanlogin BOOLEAN = true, rolreplication BOOLEAN = false, "
        "rolconnlimit INTEGER = -1, rolpassword VARCHAR = '********', rolvaliduntil TIMESTAMP, "
        "rolbypassrls BOOLEAN = false, rolconfig VARCHAR[], oid INTEGER = 10"),
    "pg_user": (
        "usename VARCHAR @user, usesysid INTEGER = 10, usecreatedb BOOLEAN = false, usesuper BOOLEAN = false, "
        "userepl BOOLEAN = false, usebypassrls BOOLEAN = false, passwd VARCHAR = '********', "
        "valuntil TIMESTAMP, useconfig VARCHAR[]"),
    "pg_database": (
        "oid INTEGER = 16383, datname VARCHAR @db, datdba INTEGER = 10, encoding INTEGER = 6, "
        "datlocprovider VARCHAR = 'c', datistemplate BOOLEAN = false, datallowconn BOOLEAN = true, "
        "datconnlimit INTEGER = -1, datfrozenxid INTEGER = 0, datminmxid INTEGER = 1, dattablespace INTEGER = 1663, "
        "datcollate VARCHAR = 'C.UTF-8', datctype VARCHAR = 'C.UTF-8', daticulocale VARCHAR, "
        "datcollversion VARCHAR, datacl VARCHAR[]"),
}

_INFO_TABLE = ("table_catalog VARCHAR @db, table_schema VARCHAR = 'public', table_name VARCHAR, "
               "table_type VARCHAR = 'BASE TABLE', self_referencing_column_name VARCHAR, reference_generation VARCHAR, "
               "user_defined_type_catalog VARCHAR, user_defined_type_schema VARCHAR, "
               "user_defined_type_name VARCHAR, is_insertable_into VARCHAR = 'NO', is_typed VARCHAR = 'NO', "
               "commit_action VARCHAR")
_INFO_COLUMN = (
    "table_catalog VARCHAR @db, table_schema VARCHAR = 'public', table_name VARCHAR, column_name VARCHAR, "
    "ordinal_position INTEGER, column_default VARCHAR, is_nullable VARCHAR = 'YES', data_type VARCHAR, "
    "character_maximum_length INTEGER, character_octet_length INTEGER, numeric_precision INTEGER, "
    "numeric_precision_radix INTEGER, numeric_scale INTEGER, datetime_precision INTEGER, interval_type VARCHAR, "
    "interval_precision INTEGER, character_set_catalog VARCHAR, character_set_schema VARCHAR, "
    "character_set_name VARCHAR, collation_catalog VARCHAR, collation_schema VARCHAR, collation_name VARCHAR, "
    "domain_catalog VARCHAR, domain_schema VARCHAR, domain_name VARCHAR, udt_catalog VARCHAR @db, "
    "udt_schema VARCHAR = 'pg_catalog', udt_name VARCHAR, scope_catalog VARCHAR, scope_schema VARCHAR, "
    "scope_name VARCHAR, maximum_cardinality INTEGER, dtd_identifier VARCHAR, is_self_referencing VARCHAR = 'NO', "
    "is_identity VARCHAR = 'NO', identity_generation VARCHAR, identity_start VARCHAR, identity_increment VARCHAR, "
    "identity_maximum VARCHAR, identity_minimum VARCHAR, identity_cycle VARCHAR = 'NO', "
    "is_generated VARCHAR = 'NEVER', generation_expression VARCHAR, is_updatable VARCHAR = 'NO'")
_CONSTRAINT = ("constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR, "
               "table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR")
#: information_schema views, as for pg_catalog
INFO = {
    "tables": _INFO_TABLE,
    "columns": _INFO_COLUMN,
    "schemata": ("catalog_name VARCHAR @db, schema_name VARCHAR, schema_owner VARCHAR @user, "
                 "default_character_set_catalog VARCHAR, default_character_set_schema VARCHAR, "
                 "default_character_set_name VARCHAR, sql_path VARCHAR"),
    "views": ("table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, view_definition VARCHAR, "
              "check_option VARCHAR, is_updatable VARCHAR, is_insertable_into VARCHAR, "
              "is_trigger_updatable VARCHAR, is_trigger_deletable VARCHAR, is_trigger_insertable_into VARCHAR"),
    "table_constraints": _CONSTRAINT + (", constraint_type VARCHAR, is_deferrable VARCHAR, "
                                        "initially_deferred VARCHAR, enforced VARCHAR, nulls_distinct VARCHAR"),
    "key_column_usage": _CONSTRAINT + (", column_name VARCHAR, ordinal_position INTEGER, "
                                       "position_in_unique_constraint INTEGER"),
    "constraint_column_usage": ("table_catalog VARCHAR, table_schema VARCHAR, table_name VARCHAR, "
                                "column_name VARCHAR, constraint_catalog VARCHAR, constraint_schema VARCHAR, "
                                "constraint_name VARCHAR"),
    "referential_constraints": ("constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR, "
                                "unique_constraint_catalog VARCHAR, unique_constraint_schema VARCHAR, "
                                "unique_constraint_name VARCHAR, match_option VARCHAR, update_rule VARCHAR, "
                                "delete_rule VARCHAR"),
    "check_constraints": "constraint_catalog VARCHAR, constraint_schema VARCHAR, constraint_name VARCHAR, "
                         "check_clause VARCHAR",
    "routines": ("specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR, routine_catalog VARCHAR, "
                 "routine_schema VARCHAR, routine_name VARCHAR, routine_type VARCHAR, data_type VARCHAR, "
                 "routine_definition VARCHAR, external_language VARCHAR"),
    "parameters": ("specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR, "
                   "ordinal_position INTEGER, parameter_mode VARCHAR, parameter_name VARCHAR, data_type VARCHAR"),
    "sequences": ("sequence_catalog VARCHAR, sequence_schema VARCHAR, sequence_name VARCHAR, data_type VARCHAR, "
                  "start_value VARCHAR, minimum_value VARCHAR, maximum_value VARCHAR, increment VARCHAR, "
                  "cycle_option VARCHAR"),
    "triggers": ("trigger_catalog VARCHAR, trigger_schema VARCHAR, trigger_name VARCHAR, event_manipulation VARCHAR, "
                 "event_object_catalog VARCHAR, event_object_schema VARCHAR, event_object_table VARCHAR, "
                 "action_statement VARCHAR, action_timing VARCHAR"),
    "table_privileges": ("grantor VARCHAR, grantee VARCHAR, table_catalog VARCHAR, table_schema VARCHAR, "
                         "table_name VARCHAR, privilege_type VARCHAR, is_grantable VARCHAR, with_hierarchy VARCHAR"),
    "column_privileges": ("grantor VARCHAR, grantee VARCHAR, table_catalog VARCHAR, table_schema VARCHAR, "
                          "table_name VARCHAR, column_name VARCHAR, privilege_type VARCHAR, is_grantable VARCHAR"),
    "character_sets": ("character_set_catalog VARCHAR, character_set_schema VARCHAR, character_set_name VARCHAR, "
                       "character_repertoire VARCHAR, form_of_use VARCHAR, default_collate_catalog VARCHAR, "
                       "default_collate_schema VARCHAR, default_collate_name VARCHAR"),
}

#: settings pg_settings lists (SHOW answers from the session first, then these)
SETTINGS = {
    "server_version": "16.0", "server_version_num": "160000", "server_encoding": "UTF8", "client_encoding": "UTF8",
    "datestyle": "ISO, MDY", "intervalstyle": "postgres", "timezone": "UTC", "integer_datetimes": "on",
    "standard_conforming_strings": "on", "search_path": '"$user", public', "max_index_keys": "32",
    "max_identifier_length": "63", "max_function_args": "100", "block_size": "8192",
    "transaction_isolation": "read committed", "default_transaction_isolation": "read committed",
    "transaction_read_only": "on", "default_transaction_read_only": "on", "is_superuser": "off", "jit": "off",
    "lc_collate": "C.UTF-8", "lc_ctype": "C.UTF-8", "application_name": "", "extra_float_digits": "1",
    "statement_timeout": "0", "lock_timeout": "0", "idle_in_transaction_session_timeout": "0",
}


def relations() -> dict[str, dict[str, dict[str, str]]]:
    """PostgreSQL schema → relation → its columns (name → DuckDB type): what a query may read."""
    return {"pg_catalog": {name: {c: d.split()[0] for c, d, _ in column_specs(spec)} for name, spec in PG.items()},
            "information_schema": {name: {c: d.split()[0] for c, d, _ in column_specs(spec)}
                                   for name, spec in INFO.items()}}


def per_connection(schema: str, name: str) -> bool:
    """Whether the relation is a table macro of (user, database)."""
    return "@" in (PG if schema == "pg_catalog" else INFO)[name]


def display(oid: int) -> str:
    if oid in DISPLAY_NAMES:
        return DISPLAY_NAMES[oid]
    element = {array: e for e, _, _, _, array, _ in TYPES if array}.get(oid)
    return f"{DISPLAY_NAMES[element]}[]" if element else "???"


__all__ = ["DISPLAY_NAMES", "FIRST_TABLE", "INFO", "INFORMATION_SCHEMA", "PG_CATALOG", "PUBLIC", "PG", "PSEUDO", "SCHEMAS", "SETTINGS", "TEXT_COLLATION", "TYPES",
           "TYPE_NAMES", "column_specs", "display", "per_connection", "relations"]
