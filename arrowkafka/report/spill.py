"""Where the report computes what needs a whole table at once (a join of requests and responses,
an order per key, exact quantiles): DuckDB, with its memory capped and a folder to spill to
beyond the cap, so the report's memory follows the cap and not the capture.

    with Spill() as db:
        db.store("commits", parts)                 # Arrow tables, appended as they come
        t = db.table("SELECT ... FROM commits ...")  # a pa.Table (only what the query keeps)

Each ``Spill`` is an in-memory database that spills to a folder of its own under the temporary
folder, removed on close. The cap is ``MEMORY_LIMIT`` (``ARROWKAFKA_REPORT_MEMORY`` overrides
it: ``512MB``, ``2GB``). Tables read from Parquet by ``parquet(paths)`` are streamed by DuckDB
itself, only the columns a query names. A row's place in the capture (what breaks ties of
time) is its file's place in the table's parts and its row in that file: ``place``.

The helpers every module shares: ``literal`` (a SQL string), ``files`` (a table's Parquet
files), ``pairs`` (requests with their responses), ``limited`` and ``with_total`` (a list cut to
its first rows, saying how long it is whole).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType

import duckdb
import pyarrow as pa

from arrowkafka.report import compute

__all__ = [
    "COLUMN_TYPES",
    "LINK",
    "MEMORY_LIMIT",
    "THREADS",
    "Spill",
    "files",
    "limited",
    "linked",
    "literal",
    "pairs",
    "parquet",
    "place",
    "placed",
    "with_total",
]

MEMORY_LIMIT = "256MB"
THREADS = 2

# what pairs a response with its request, with the request's time (``_ts_first``, which the
# response gives as ``_request_ts``): the capture file, the connection and the correlation id
LINK = ["_capture", "_client", "_broker", "_correlation_id"]


# the DuckDB type of each column a query reads that a table may lack (a capture without the
# response table, a table written by a tool that decoded only some versions): a typed null
COLUMN_TYPES = {
    "error_code": "SMALLINT",
    "group_id": "VARCHAR",
    "member_id": "VARCHAR",
    "generation_id": "INTEGER",
    "member_epoch": "INTEGER",
    "producer_id": "BIGINT",
    "producer_epoch": "SMALLINT",
}


def literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def place(prefix: str = "") -> str:
    """A row's place in the capture as one number (for ORDER BY, min, arg_max): its file's place
    in the table's parts, then its row in the file, from ``parquet``'s virtual columns
    ``file_index`` and ``file_row_number`` (as ``pairs`` names them: ``r_`` for a response's)."""
    return f"(({prefix}file_index::HUGEINT << 64) | {prefix}file_row_number)"


def _path(p: Path | str) -> str:
    # absolute (DuckDB would read a leading ``~`` as the home folder), and DuckDB reads every
    # path as a glob: ``*``, ``?`` and ``[`` of a folder's name are matched as themselves
    return "".join(f"[{c}]" if c in "*?[" else c for c in str(Path(p).absolute()))


def parquet(paths: Sequence[Path | str]) -> str:
    """A DuckDB table expression over Parquet files (a table's parts read as one; a column a
    part lacks is null there), each path as it is (no glob). Besides the files' columns, a row
    has DuckDB's virtual columns ``file_index`` (its file's place in ``paths``) and
    ``file_row_number``."""
    names = ", ".join(literal(_path(p)) for p in paths)
    return f"read_parquet([{names}], union_by_name = true)"


def placed(paths: Sequence[Path | str]) -> str:
    """``parquet(paths)`` with each row's place in the capture as the column ``_at``."""
    return f"(SELECT *, {place()} AS _at FROM {parquet(paths)})"


def files(outdir: str | Path, table: str) -> list[Path]:
    """The Parquet files of the folder's table ``table`` (none if it has no such table)."""
    p = compute._path(outdir, table)
    return compute._parts(p) if p is not None else []


class Spill:
    """A DuckDB database for one computation: memory capped, spilling to its own folder."""

    def __init__(self, memory_limit: str | None = None) -> None:
        cap = memory_limit or os.environ.get("ARROWKAFKA_REPORT_MEMORY") or MEMORY_LIMIT
        # (DuckDB takes a negative or unknown size as no cap at all: 80% of the machine)
        if not re.fullmatch(r"\s*\d+(\.\d+)?\s*([KMGT]i?B|B)\s*", cap, re.IGNORECASE):
            raise ValueError(f"ARROWKAFKA_REPORT_MEMORY: {cap!r} is not a size such as 256MB or 2GB")
        self.folder = Path(tempfile.mkdtemp(prefix="arrowkafka-report-"))
        con = None
        try:
            # in memory: what it stores spills to the folder too, and a run killed mid-way
            # leaves no database file behind
            self.con = con = duckdb.connect(
                ":memory:",
                config={
                    "memory_limit": cap,
                    "temp_directory": str(self.folder / "spill"),
                    "threads": THREADS,
                    # no query here depends on the order rows come back in without ORDER BY
                    "preserve_insertion_order": False,
                    # DuckDB would keep the Parquet bytes it read in its pool: the report reads
                    # each table once or twice, and the pool would fill towards the cap
                    "enable_external_file_cache": False,
                },
            )
            self.con.execute("SET enable_progress_bar = false")  # (it would draw on the terminal)
        except BaseException:
            if con is not None:  # closed before its folder goes
                con.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def store(self, name: str, parts: Iterable[pa.Table], schema: pa.Schema | None = None) -> int:
        """Append ``parts`` to the table ``name`` (made from ``schema``, else the first part's
        columns); the rows stored. With no part and no schema, no table is made (0)."""
        rows = 0
        made = False
        if schema is not None:
            self._append(name, schema.empty_table(), create=True)
            made = True
        for part in parts:
            self._append(name, part, create=not made)
            made = True
            rows += part.num_rows
        return rows

    def _append(self, name: str, part: pa.Table, create: bool) -> None:
        self.con.register("_part", part)
        try:
            verb = f'CREATE TABLE "{name}" AS' if create else f'INSERT INTO "{name}"'
            self.con.execute(f'{verb} SELECT * FROM "_part"')
        finally:
            self.con.unregister("_part")

    def table(self, sql: str, params: Sequence[object] = ()) -> pa.Table:
        """The query's result as a ``pa.Table``."""
        return self.con.sql(sql, params=list(params) or None).to_arrow_table()

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Spill:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def with_total(t: pa.Table, total: int, limit: int | None) -> pa.Table:
    """``t``, and with a ``limit`` (a list cut to its first rows) the whole list's row count as
    the metadata ``total_rows`` (what the report says of the rows it does not show)."""
    if limit is None:
        return t
    return t.replace_schema_metadata({**(t.schema.metadata or {}), b"total_rows": str(total).encode()})


def limited(
    db: Spill,
    table: str,
    order: str,
    limit: int | None,
    finish: Callable[[pa.Table], pa.Table] = lambda t: t,
    columns: str = "*",
) -> pa.Table:
    """``columns`` of the table ``table`` of ``db`` by ``order``, ``finish``ed (cast, named):
    all the rows, or with a ``limit`` the first ``limit`` (a top-n: only those are held) and
    ``with_total`` the count of all."""
    select = f"SELECT {columns} FROM {table} ORDER BY {order}"
    if limit is None:
        return finish(db.table(select))
    total = db.con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
    return with_total(finish(db.table(f"{select} LIMIT {max(int(limit), 0)}")), total, limit)


def linked(request: str, response: str) -> str:
    """The SQL condition that the rows ``response`` (a response table's) answer the rows
    ``request``: the same capture file, connection (client and broker) and correlation id, and
    the request's time (``_ts_first``) is the response's ``_request_ts``. A connection whose
    correlation ids come back (ports reused, a client restarted) pairs each with its own."""
    same = [f'{request}."{c}" = {response}."{c}"' for c in LINK]
    return " AND ".join([*same, f'{request}."_ts_first" = {response}."_request_ts"'])


def pairs(
    request: Sequence[Path | str],
    response: Sequence[Path | str],
    request_cols: Sequence[str],
    response_cols: Sequence[str],
) -> str:
    """A SQL subquery: every request (the files of its table) with its response, left joined
    (a request with no response in the capture keeps its row, response columns null). A response
    belongs to the request of the same capture file, connection (client and broker) and
    correlation id whose time (``_ts_first``) is the response's ``_request_ts``: a connection
    whose correlation ids come back (ports reused, a client restarted) pairs each with its own.
    Columns: ``request_cols`` as they are, ``response_cols`` prefixed ``r_``. ``response`` may
    be empty (only one direction captured): the response columns are then typed nulls (the rule:
    ``linked``)."""
    q_cols = ", ".join(f'q."{c}"' for c in dict.fromkeys(request_cols))
    r_cols = ", ".join(f'r."{c}" AS "r_{c}"' for c in response_cols)
    if response:
        names = ", ".join(f'"{c}"' for c in [*LINK, "_request_ts", *response_cols])
        r_src = f"(SELECT {names} FROM {parquet(response)})"
    else:
        nulls = [f'NULL::VARCHAR AS "{c}"' for c in LINK[:3]] + ['NULL::INTEGER AS "_correlation_id"']
        nulls += ['NULL::TIMESTAMPTZ AS "_request_ts"']
        nulls += [f'NULL::{COLUMN_TYPES.get(c, "VARCHAR")} AS "{c}"' for c in response_cols]
        r_src = f"(SELECT {', '.join(nulls)} WHERE false)"
    on = linked("q", "r")
    sep = ", " if r_cols else ""
    return f"(SELECT {q_cols}{sep}{r_cols} FROM {parquet(request)} q LEFT JOIN {r_src} r ON {on})"
