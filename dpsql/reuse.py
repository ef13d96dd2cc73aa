"""Reusing a release: the same query asked again gets the earlier noisy answer, for no charge.

Publishing a released answer again is post-processing, so it spends nothing; and a dashboard
that refreshes every minute must not drain the budget. A release is kept in the ledger file
(:mod:`dpsql._accounting.releases`) under a key that covers everything its answer depends on:

* the statement after the policy's ``[defaults]``, with whitespace, keyword case and identifier
  case normalised (:attr:`PreparedQuery.canonical`), and the output column names as written;
* the validated options (ε, δ, ρ, mechanism, confidence, keys, bounds, ...);
* the policy (its tables, bounds, units, neighbouring relation and defaults; not its file name,
  ledger path or total budget), the database the tables are read from, and the ledger's kind;
* the user the :class:`~dpsql.Connection` was opened for (``user=``; None is a user too).

What is stored is the release as published (the noisy table, its report and notes), never a
noise seed. Releases made with a test noise source are neither stored nor looked up, so they
can never be served to a query that expects real noise. How long a release may be reused is
the policy's ``[defaults] reuse_releases`` (``forever`` unless it says otherwise).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import typing as t
from datetime import datetime

from dpsql._accounting.budget import Cost
from dpsql._privacy.report import ReportEntry
from dpsql.result import Result

if t.TYPE_CHECKING:
    from dpsql._accounting.releases import StoredRelease
    from dpsql._policy.policy import Policy
    from dpsql._query.pipeline import PreparedQuery

__all__ = ["key", "encode", "decode", "reused_note"]

_VERSION = 1


def _plain(value: t.Any) -> t.Any:
    """A JSON-able form of an option value, with sets sorted (their order is not stable)."""
    if isinstance(value, (frozenset, set)):
        return sorted(map(str, value))
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value if value is None or isinstance(value, (str, int, bool)) else repr(value)


def _policy_identity(policy: "Policy") -> str:
    """What about the policy an answer depends on; not its file, ledger or total budget."""
    defaults = dataclasses.replace(policy.defaults, reuse_seconds=0.0)
    return repr((sorted(policy.tables.items()), policy.neighbouring, policy.group_size, defaults))


def key(prepared: "PreparedQuery", policy: "Policy", *, database: t.Sequence[str | None], kind: str,
        user: str | None) -> str:
    """The reuse key of a DP query: a SHA-256 of everything its release depends on."""
    options = {f.name: _plain(getattr(prepared.bound.options, f.name))
               for f in dataclasses.fields(prepared.bound.options)}
    parts = {
        "version": _VERSION,
        "query": prepared.canonical,
        "names": list(prepared.bound.output_names or []),
        "options": options,
        "policy": _policy_identity(policy),
        "database": list(database),
        "kind": kind,
        "user": user,
    }
    text = json.dumps(parts, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode(result: Result) -> bytes:
    """The stored form of a release: a JSON header (report, notes, ...) and the Arrow table."""
    import pyarrow as pa

    meta = {
        "version": _VERSION,
        "report": [e.as_dict() for e in result.report],
        "cost": [result.cost.epsilon, result.cost.delta, result.cost.rho],
        "notes": list(result.notes),
        "confidence": result.confidence,
        "sources": list(result.sources),
        "widths": result.widths,
    }
    head = json.dumps(meta, ensure_ascii=True, allow_nan=True).encode("utf-8")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, result.table.schema) as writer:
        writer.write_table(result.table)
    return struct.pack(">I", len(head)) + head + sink.getvalue().to_pybytes()


def reused_note(time: datetime) -> str:
    """The report line of a reused release."""
    return f"reused release of {time.strftime('%Y-%m-%d %H:%M:%S UTC')}, no charge"


def decode(stored: "StoredRelease") -> Result | None:
    """The release as first published, now charging nothing; None if it cannot be read."""
    import pyarrow as pa

    try:
        payload = stored.payload
        (size,) = struct.unpack(">I", payload[:4])
        meta = json.loads(payload[4:4 + size].decode("utf-8"))
        if meta.get("version") != _VERSION:
            return None
        table = pa.ipc.open_stream(payload[4 + size:]).read_all()
        report = [ReportEntry(**entry) for entry in meta["report"]]
        notes = [*meta["notes"], reused_note(stored.time)]
        return Result(table=table, report=report, cost=Cost(), notes=notes,
                      confidence=float(meta["confidence"]), sources=list(meta["sources"]),
                      widths=meta.get("widths"))
    except (ValueError, TypeError, KeyError, struct.error, pa.ArrowException):
        return None  # unreadable: answer afresh (and charge) rather than fail
