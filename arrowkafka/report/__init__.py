"""The capture report: numbers computed from the Parquet tables `arrowkafka decode` writes
(``compute``: one function per table, each returning a ``pa.Table``), and one self-contained
HTML file that shows them (``present``; ``build_report``).

    import arrowkafka.report as rep
    rep.latency("out")            # per API and version: responses, p50, p99, max (ms)
    rep.build_report("out")       # writes out/report.html, returns its path
"""

from arrowkafka.report.compute import (
    SECTIONS,
    Timeline,
    apis,
    committed_offsets,
    compression,
    connections,
    error_fields,
    errors,
    errors_over_time,
    group_events,
    group_summary,
    lag,
    latency,
    latency_over_time,
    markers,
    overview,
    producers,
    rejects,
    sequences,
    slowest,
    throughput_by_client,
    throughput_by_partition,
    throughput_by_topic,
    throughput_over_time,
    timeline,
    transactions,
)
from arrowkafka.report.errors import ERROR_NAMES, error_name
from arrowkafka.report.present import ReportError, build_report, render_html

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
