"""The capture report: numbers computed from the Parquet tables `arrowkafka decode` writes (one
function per table, each returning a ``pa.Table``), and one self-contained HTML file that shows
them (``present``; ``build_report``).

    import arrowkafka.report as rep
    rep.latency("out")            # per API and version: responses, p50, p99, max (ms)
    rep.build_report("out")       # writes out/report.html, returns its path

Where the numbers are computed: ``compute`` streams the Parquet tables a record batch at a time
into what follows topics, partitions, API versions, error codes and time buckets; what needs a
whole table at once runs on DuckDB with its memory capped, spilling to disk (``spill``):
``clients`` (connections, the overview, throughput per client), ``latencies``, ``membership``
(group events), ``offsets`` (committed offsets, lag), ``producing`` (producers, sequences,
transactions, markers).
"""

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from arrowkafka.report.clients import connections, overview, throughput_by_client
from arrowkafka.report.compute import (
    Timeline,
    apis,
    compression,
    error_fields,
    errors,
    errors_over_time,
    rejects,
    throughput_by_partition,
    throughput_by_topic,
    throughput_over_time,
    timeline,
)
from arrowkafka.report.errors import ERROR_NAMES, error_name
from arrowkafka.report.latencies import latency, latency_over_time, slowest
from arrowkafka.report.membership import group_events, group_summary
from arrowkafka.report.offsets import committed_offsets, lag
from arrowkafka.report.present import ReportError, build_report, render_html
from arrowkafka.report.producing import markers, producers, sequences, transactions

# every table of the report, by section (each function takes the output folder)
SECTIONS: dict[str, list[Callable[[str | Path], pa.Table]]] = {
    "overview": [overview, connections, apis, rejects],
    "latency": [latency, latency_over_time, slowest],
    "throughput": [
        throughput_by_topic,
        throughput_by_partition,
        throughput_by_client,
        throughput_over_time,
        compression,
    ],
    "errors": [errors, errors_over_time],
    "groups": [group_summary, group_events, committed_offsets, lag],
    "producers": [producers, sequences, transactions, markers],
}
__all__ = [
    "ERROR_NAMES",
    "SECTIONS",
    "ReportError",
    "Timeline",
    "apis",
    "build_report",
    "committed_offsets",
    "compression",
    "connections",
    "error_fields",
    "error_name",
    "errors",
    "errors_over_time",
    "group_events",
    "group_summary",
    "lag",
    "latency",
    "latency_over_time",
    "markers",
    "overview",
    "producers",
    "rejects",
    "render_html",
    "sequences",
    "slowest",
    "throughput_by_client",
    "throughput_by_partition",
    "throughput_by_topic",
    "throughput_over_time",
    "timeline",
    "transactions",
]
