"""Where the report computes what needs a whole table at once (a join of requests and responses,
an order per key, exact quantiles): DuckDB, with its memory capped and a folder to spill to
beyond the cap, so the report's memory follows the cap and not the capture.

    with Spill() as db:
        db.store("commits", parts)                 # Arrow tables, appended as they come
        t = db.table("SELECT ... FROM commits ...")  # a pa.Table (only what the query keeps)

Each ``Spill`` is a database file in a folder of its own under the temporary folder, removed on
close. The cap is ``MEMORY_LIMIT`` (``ARROWKAFKA_REPORT_MEMORY`` overrides it: ``512MB``, ``2GB``).
Tables read from Parquet by ``parquet(paths)`` are streamed by DuckDB itself, only the columns a
query names.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

import duckdb
import pyarrow as pa

__all__ = ["MEMORY_LIMIT", "THREADS", "Spill", "parquet"]

MEMORY_LIMIT = "256MB"
THREADS = 2


def parquet(paths: Sequence[Path | str]) -> str:
    """A DuckDB table expression over Parquet files (a table's parts read as one; a column a
    part lacks is null there)."""
    files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    return f"read_parquet([{files}], union_by_name = true)"


class Spill:
    """A DuckDB database for one computation: memory capped, spilling to its own folder."""

    def __init__(self, memory_limit: str | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="arrowkafka-report-"))
        try:
            self.con = duckdb.connect(
                str(self.folder / "report.duckdb"),
                config={
                    "memory_limit": memory_limit or os.environ.get("ARROWKAFKA_REPORT_MEMORY", MEMORY_LIMIT),
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

    def has(self, name: str) -> bool:
        return bool(
            self.con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
            ).fetchone()[0]  # type: ignore[index]
        )

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


# the DuckDB type of each response column ``pairs`` reads, for a capture without the response
# table (a string column otherwise)
_RESPONSE_TYPES = {
    "error_code": "SMALLINT",
    "member_id": "VARCHAR",
    "generation_id": "INTEGER",
    "member_epoch": "INTEGER",
    "producer_id": "BIGINT",
    "producer_epoch": "SMALLINT",
    "_latency_ns": "BIGINT",
}


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
    be empty (only one direction captured): the response columns are then typed nulls."""
    link = ["_capture", "_client", "_broker", "_correlation_id"]
    q_cols = ", ".join(f'q."{c}"' for c in dict.fromkeys(request_cols))
    r_cols = ", ".join(f'r."{c}" AS "r_{c}"' for c in response_cols)
    if response:
        names = ", ".join(f'"{c}"' for c in [*link, "_request_ts", *response_cols])
        r_src = f"(SELECT {names} FROM {parquet(response)})"
    else:
        nulls = [f'NULL::VARCHAR AS "{c}"' for c in link[:3]] + ['NULL::INTEGER AS "_correlation_id"']
        nulls += ['NULL::TIMESTAMPTZ AS "_request_ts"']
        nulls += [f'NULL::{_RESPONSE_TYPES.get(c, "VARCHAR")} AS "{c}"' for c in response_cols]
        r_src = f"(SELECT {', '.join(nulls)} WHERE false)"
    on = " AND ".join([*(f'q."{c}" = r."{c}"' for c in link), 'q."_ts_first" = r."_request_ts"'])
    sep = ", " if r_cols else ""
    return f"(SELECT {q_cols}{sep}{r_cols} FROM {parquet(request)} q LEFT JOIN {r_src} r ON {on})"
