"""The size model of expressions over private rows (dpsql._sql.size).

Every allowlisted node has a rule; each rule's bound holds for the values DuckDB really computes
(on inputs chosen to make text grow: case mappings that lengthen UTF-8, JSON numbers written
out, empty regex matches, BLOBs written as text); expressions past the limits are refused, the
same way whether the growth is written in place or through CTEs, before anything is read.
"""

from __future__ import annotations

import time
import typing as t

import duckdb
import pytest
import sqlglot
from sqlglot import exp

import dpsql
from dpsql._privacy.noise import SeededNoise
from dpsql._sql import allow, size, sizerules
from dpsql._sql.dialect import DPSQL
from dpsql._sql.nonraising import OLDER
from dpsql._sql.total import total
from dpsql.errors import PrivacyError
from dpsql.interfaces.demo import connect_demo


def _bound(sql: str) -> sizerules.Bound:
    return allow.check_rowwise(sqlglot.parse_one(sql, read=DPSQL), "WHERE", "t")


def _refusal(sql: str) -> str:
    with pytest.raises(PrivacyError) as info:
        _bound(sql)
    message = str(info.value)
    assert "\n" not in message and "over t" in message
    return message


@pytest.fixture
def con() -> t.Iterator[dpsql.Connection]:
    c = connect_demo(noise=SeededNoise(0))
    yield c
    c.close()


# -- every allowlisted node has a rule ---------------------------------------------------------


def test_every_allowlisted_node_and_function_has_a_size_rule() -> None:
    missing = [cls.__name__ for cls in allow.ALLOWED if sizerules.rule_of_type(cls) is None]
    assert not missing, f"allowlisted without a size rule: {missing}"
    assert set(sizerules.NAMED) == set(allow.ANONYMOUS), set(sizerules.NAMED) ^ set(allow.ANONYMOUS)


def test_an_unknown_function_gets_no_rule() -> None:
    """The check above can fail: a node class without an entry has no rule."""
    assert sizerules.rule_of_type(exp.Repeat) is None
    assert sizerules.rule_of(exp.Anonymous(this="list_resize")) is None


# -- bounds --------------------------------------------------------------------------------------


@pytest.mark.parametrize("sql,a,b", [
    ("'abc'", 0, 3),
    ("'é'", 0, 2),
    ("s", 1, 0),
    ("s || 'abc'", 1, 3),
    ("concat(s, s, 'ab')", 2, 2),
    ("concat_ws('--', s, s, s)", 3, 4),
    ("replace(s, 'a', 'xyz')", 3, 0),
    ("replace(s, 'ab', 'xyz')", 1.5, 0),
    ("replace(s, 'abc', 'x')", 1, 0),
    ("replace(s, t, 'xyz')", 3, 0),
    ("replace(s, 'a', CASE WHEN n > 0 THEN 'xy' ELSE 'xyzw' END)", 4, 0),
    ("regexp_replace(s, 'a', 'xy')", 1, 2),
    ("regexp_replace(s, 'a', 'xy', 'g')", 3, 2),  # L bytes kept, ≤ L + 1 matches of 2 bytes
    ("regexp_replace(s, '(a)', '\\1\\1', 'g')", 3, 0),  # two copies of what matched: 2·L
    ("regexp_replace(s, '(a)', '<\\1\\\\1>', 'g')", 7, 5),  # one copy; <, \\ (2 bytes), 1, > per match
    ("CASE WHEN n > 0 THEN s ELSE 'abcdef' END", 1, 6),
    ("coalesce(s, t || t)", 2, 0),
    ("upper(lower(s))", 4, 0),
    ("to_base64(s)", 4 / 3, 4),
    ("length(replace(s, 'a', 'xyz'))", 0, sizerules.SCALAR),
    ("s LIKE '%a%'", 0, 5),
    ("substring(s || s, 1, 3)", 2, 0),
])
def test_bounds_follow_the_rules(sql: str, a: float, b: float) -> None:
    got = _bound(sql)
    assert (got.a, got.b) == pytest.approx((a, b)), got


def test_work_counts_text_built_not_text_chosen() -> None:
    assert _bound("CASE WHEN n > 0 THEN s ELSE t END").wa == 0  # chooses, builds nothing
    assert _bound("s || s").wa == 2
    assert _bound("upper(s || s)").wa == 2 + 4  # each node's output, summed


# Values chosen to make each function's output long, and long enough to be the row's longest
# value: case mappings that lengthen UTF-8 (ɐ→Ɐ, Ⱥ→ⱥ), a character NFC expands (U+0344), JSON
# numbers written out (1e20), bytes a BLOB writes as \xFF, separators, empty strings.
_ROWS = [
    ("ɐ" * 40, "Ⱥ" * 30, 7, "2020-01-01 00:00:00"),
    ("\u0344" * 40, "ß" * 30, -9223372036854775807, "1900-12-31 23:59:59"),
    ("[" + ",".join(["1e20"] * 12) + "]", "1e16", 170141183460469, "294246-12-31 23:59:59"),
    ("/" * 128, "+/" * 16, 0, "2000-02-29 12:00:00"),
    ("a" * 64, "a", 1, "1970-01-01 00:00:00"),
    ("a,b,,c" * 8, ",", 2, "2024-06-30 06:30:00"),
    ("", "", 3, "2001-01-01 00:00:00"),
    ("héllo wörld" * 4, "ö", 4, "1999-12-31 23:59:59"),
    ("%c%Z%A" * 8, "%B%n", 5, "2021-09-15 18:00:00"),
]

_GROWING = [
    "upper(s)", "lower(t)", "ucase(s)", "lcase(t)", "initcap(s)", "strip_accents(s)", "nfc_normalize(s)",
    "s || t", "concat(s, n, d)", "concat_ws(t, s, s, s)", "replace(s, 'a', 'xyz')", "replace(s, '', 'xyz')",
    "replace(s, t, 'xy')", "regexp_replace(s, '', 'XY', 'g')", "regexp_replace(s, 'a*', '\\0\\0', 'g')",
    "regexp_replace(s, '(.)', '\\1\\1\\1')", "regexp_replace(s, '.*', '\\0\\0\\0\\0', 'g')",
    "regexp_replace(s, '', '\\\\9', 'g')", "strftime(d, '%c%c%c%c%c%c%c%c')", "to_base64(b)",
    "CAST(b AS VARCHAR)", "CAST(b AS BIT)", "upper(CAST(b AS VARCHAR))", "regexp_replace(s, '.', 'éé', 'g')",
    "to_base64(CAST(s AS BLOB))", "from_base64(s)",
    "CAST(from_base64(s) AS VARCHAR)", "CAST(from_base64(s) AS BIT)", "CAST(s AS BLOB)", "json_extract(s, '$')",
    "s ->> '$[0]'", "json_extract(s, '$[*]')",
    "strftime(d, '%c %Z %A %B %f')", "strftime(d, '%c%c%c%x%X%f%z%j%p')", "CAST(n AS BIT)", "CAST(n AS VARCHAR)",
    "md5(s)", "sha256(s)", "chr(CAST(abs(n) % 1000 + 32 AS INT))", "reverse(s)", "substring(s, 2, 3)",
    "trim(s, 'a')", "left(s, -2)", "right(s, 100)", "split_part(s, ',', 2)", "regexp_extract(s, '[a-zé]+')",
    "CASE WHEN n > 0 THEN s ELSE t || t END", "coalesce(NULL, s)", "greatest(s, t)", "least(s, t)",
    "if(n > 0, s, t)", "ifnull(s, t)", "nullif(s, t)", "to_base(abs(n), 2, 64)", "dayname(d)",
    "make_timestamp(n, 1, 1, 0, 0, 0)", "to_hours(n)", "date_trunc('month', d)",
]


def test_each_bound_holds_for_the_values_duckdb_computes() -> None:
    """octet length of the value ≤ a·L + b, L the row's longest value as text (as the rewrite
    runs it: inside TRY)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (s VARCHAR, t VARCHAR, n BIGINT, d TIMESTAMP, b BLOB)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [(*row, b"x") for row in _ROWS])
    con.execute("INSERT INTO t VALUES ('a', 'b', 1, '2000-01-01', ?)", [b"\xff" * 200])  # b the longest
    longest = ("greatest(strlen(s), strlen(t), strlen(CAST(n AS VARCHAR)), strlen(CAST(d AS VARCHAR)), "
               "octet_length(b))")
    for sql in _GROWING:
        bound = _bound(sql)
        value = total(sqlglot.parse_one(sql, read=DPSQL)).sql(dialect="duckdb")
        for got, L in con.execute(f"SELECT {value}, {longest} FROM t").fetchall():
            if got is None:
                continue
            n = len(got) if isinstance(got, bytes) else len(str(got).encode("utf-8"))
            assert n <= bound.a * L + bound.b, f"{sql}: {got!r} is {n} bytes, over {bound.a}·{L} + {bound.b}"


# -- refusals ----------------------------------------------------------------------------------

R20 = "'" + "a" * 20 + "'"


def _nest(template: str, inner: str, depth: int = 5) -> str:
    for _ in range(depth):
        inner = template.format(inner)
    return inner


def test_the_issue_spellings_are_refused() -> None:
    seed = f"CASE WHEN n = 77516 THEN {R20} ELSE 'b' END"
    for template, name in ((f"replace({{}}, 'a', {R20})", "replace()"),
                           (f"regexp_replace({{}}, 'a', {R20}, 'g')", "regexp_replace()")):
        message = _refusal(f"length({_nest(template, seed)}) > 0")
        assert message.startswith((f"{name} in WHERE of a DP query over t could make a value of",
                                   "the expression in WHERE of a DP query over t could process"))
        assert "past dpsql's limit of" in message


@pytest.mark.parametrize("sql,fragment", [
    ("replace(s, 'a', s)", "replace() in WHERE of a DP query over t: its replacement must be a literal"),
    ("regexp_replace(s, 'a', t, 'g')", "its replacement must be a literal"),
    ("regexp_matches('abc', s)", "regexp_matches() in WHERE of a DP query over t: its pattern must be a literal"),
    ("regexp_matches('abc', CASE WHEN n > 0 THEN '\\pL{1000}' ELSE 'x' END)", "its pattern must be a literal"),
    ("s SIMILAR TO t", "its pattern must be a literal"),
    ("regexp_full_match(s, s)", "its pattern must be a literal"),
    ("regexp_extract(s, t)", "its pattern must be a literal"),
    ("regexp_replace(s, t, 'x')", "its pattern must be a literal"),
    ("initcap(s, t)", "its pattern must be a literal"),
    ("levenshtein(s, '" + "x" * 300 + "')", "levenshtein() in WHERE of a DP query over t: its time grows"),
    ("damerau_levenshtein(upper(upper(upper(s))), t)", "grows with the product"),
    ("jaro_similarity(s, replace(t, 'a', 'xxxxxxxx'))", "grows with the product"),
    ("'" + "x" * (size.MAX_ADDED + 1) + "' = s", "a literal in WHERE"),
    (_nest("upper({})", "s", 7), "upper() in WHERE of a DP query over t could make a value of 128× the row's"),
    (" || ".join(["s"] * 65), "limit of 64×"),
    (" OR ".join(f"length(upper(concat(s, t))) = {i}" for i in range(700)), "could process 4098× the row's longest value of text"),
    (" OR ".join(f"upper(s || '{'x' * 1000}') = '{i}'" for i in range(100)), "bytes of text per row, past dpsql's limit of 4,096× plus 32,768 bytes"),
])
def test_unbounded_or_past_the_limits_is_refused(sql: str, fragment: str) -> None:
    assert fragment in _refusal(sql)


@pytest.mark.parametrize("sql", [
    "regexp_matches(s, '\\pL{1000}')",  # a literal pattern is compiled once, whatever it is
    "s SIMILAR TO 'a.*b'",
    "regexp_matches(s, 'a' || 'b')",
    pytest.param("s LIKE t", marks=pytest.mark.skipif(OLDER, reason="before DuckDB 2.0 LIKE backtracks: "
                                                      "test_like_patterns_from_rows_are_refused_before_duckdb_2")),
    "levenshtein(s, t)",
    "levenshtein(lower(s) || ' ' || lower(t), 'smith')",
    "replace(s, t, '')",
    _nest("upper({})", "s", 6),
    " || ".join(["s"] * 64),
    "s IN (" + ", ".join(f"'{i:05d}'" for i in range(20000)) + ")",
    " OR ".join(f"s = '{i}'" for i in range(2000)),
])
def test_ordinary_expressions_stay_allowed(sql: str) -> None:
    _bound(sql)


@pytest.mark.skipif(not OLDER, reason="DuckDB 2.0 matches LIKE in linear time")
@pytest.mark.parametrize("sql", ["s LIKE t", "s NOT ILIKE t", "s GLOB t"])
def test_like_patterns_from_rows_are_refused_before_duckdb_2(sql: str) -> None:
    with pytest.raises(PrivacyError, match="pattern must be a literal"):
        _bound(sql)


def test_growth_through_ctes_multiplies_as_in_place(con: dpsql.Connection) -> None:
    """A CTE's column keeps its bound: three levels of ×8 are refused as replace(replace(replace(...)))."""
    r8 = "'" + "x" * 8 + "'"
    levels = (f"WITH a AS (SELECT replace(education, 'x', {r8}) AS e FROM adult), "
              f"b AS (SELECT replace(e, 'x', {r8}) AS e FROM a), "
              f"c AS (SELECT * FROM (SELECT replace(e, 'x', {r8}) AS e FROM b)) "
              "SELECT DP_COUNT(*) FROM c WHERE length(e) > 0 WITH (epsilon = 1)")
    in_place = (f"SELECT DP_COUNT(*) FROM adult WHERE length({_nest(f'replace({{}}, {chr(39)}x{chr(39)}, {r8})', 'education', 3)}) > 0 "
                "WITH (epsilon = 1)")
    before = con.budget.spent
    for sql in (levels, in_place):
        with pytest.raises(PrivacyError) as info:
            con.sql(sql)
        assert "replace() in " in str(info.value) and "512× the row's longest value" in str(info.value)
    assert con.budget.spent == before
    two = levels.replace(f"c AS (SELECT * FROM (SELECT replace(e, 'x', {r8}) AS e FROM b))", "c AS (SELECT * FROM b)")
    assert con.sql(two).fetchall()  # 64×: allowed


def test_a_column_from_a_public_filter_or_join_keeps_a_bound(con: dpsql.Connection) -> None:
    sql = ("SELECT DP_COUNT(*) FROM (SELECT replace(education, 'a', '" + "y" * 64 + "') AS e, age FROM adult "
           "WHERE education_num IN (SELECT education_num FROM education_levels)) WHERE length(replace(e, 'y', 'yy')) > 0 "
           "WITH (epsilon = 1)")
    with pytest.raises(PrivacyError, match="128× the row's longest value"):
        con.sql(sql)


def test_the_check_is_one_fast_pass() -> None:
    node = sqlglot.parse_one("CASE WHEN age < 20 THEN 'a' WHEN upper(sex) LIKE 'M%' THEN education || 'b' "
                             "ELSE 'c' END", read=DPSQL)
    nodes = list(node.walk())
    start = time.perf_counter()
    for _ in range(100):
        size.measure(nodes, "WHERE", "t")
    assert (time.perf_counter() - start) / 100 < 0.001


@pytest.mark.parametrize("fmt", ["'%n'", "'%X%n%z'", "t"])
def test_a_strftime_format_with_nanoseconds_or_from_a_row_is_refused(fmt: str) -> None:
    """DuckDB 1.4 returns three bytes of uninitialised memory after %n; a format read from a row
    could hold %n on some rows only."""
    assert "(nanoseconds)" in _refusal(f"strftime(d, {fmt})") or fmt == "t"
    assert "must be a literal" in _refusal(f"strftime(d, {fmt})") or fmt != "t"
