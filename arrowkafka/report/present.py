"""The report as one self-contained HTML file: the report's tables (``compute`` and the DuckDB
modules beside it; a list asked for its first ``MAX_ROWS`` rows only), as HTML tables,
and plots drawn by matplotlib as inline SVG (no script, font, style sheet or image is fetched:
the file opens offline in any browser).

Every section is a ``<section data-section=NAME>``; every table a ``<table data-table=FUNCTION>``
named after the ``arrowkafka.report`` function that gives the same rows, each number cell with
its exact value in ``data-value``; a section or table with nothing in the capture says so in a
``<p class="empty">``. One small script, first in the page, records any script error in the
page into ``#report-status`` (``data-errors``), so a browser test can tell the page ran clean.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from arrowkafka.errors import ArrowKafkaError
from arrowkafka.report import clients, compute, latencies, membership, offsets, producing, spill
from arrowkafka.report.errors import KAFKA_REVISION

__all__ = ["ReportError", "build_report", "render_html"]

MAX_ROWS = 200  # rows shown per table; the rest are named, with the function that gives them all
LINES = 10  # API versions drawn per latency plot (the highest p99); every one is in the table
LANES = 24  # group members drawn in the membership plot (those with the most requests)
KINDS = 12  # (API, error) pairs drawn in the errors plot (the most frequent); the rest as "other"


class ReportError(ArrowKafkaError):
    """The report cannot be made: the folder is not decode output, a table in it cannot be read,
    a step needs more than its memory cap, or the file cannot be written."""


def build_report(outdir: str | Path, output: str | Path | None = None) -> Path:
    """Compute every section from the tables in ``outdir`` and write the report (default
    ``OUTDIR/report.html``); return its path."""
    if (why := compute.not_decode_output(outdir)) is not None:
        raise ReportError(why)
    target = Path(output) if output is not None else Path(outdir) / "report.html"
    if target.is_dir():
        raise ReportError(f"{target}: is a folder (give a file name for the report)")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such folder for the report")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ReportError(f"{target}: cannot write the report here")
    try:
        text = render_html(outdir)
    except duckdb.OutOfMemoryException as e:
        cap = os.environ.get("ARROWKAFKA_REPORT_MEMORY", spill.MEMORY_LIMIT)
        raise ReportError(
            f"{outdir}: a step of the report needs more than its memory cap ({cap}): set "
            f"ARROWKAFKA_REPORT_MEMORY higher ({_first_line(e)})"
        ) from None
    except duckdb.IOException as e:
        raise ReportError(
            f"{outdir}: the report could not read a table or spill to {tempfile.gettempdir()} "
            f"(TMPDIR chooses the folder): {_first_line(e)}"
        ) from None
    except (duckdb.Error, pa.ArrowException, KeyError, TypeError, ValueError) as e:
        # a table cut, damaged or replaced after decode wrote it (a column missing or of another
        # type), a cap that is no size
        raise ReportError(f"{outdir}: {_first_line(e)}") from None
    # written beside and renamed: a reader never sees half a report
    try:
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=folder)
    except OSError as e:
        raise ReportError(f"{target}: cannot write the report here ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise ReportError(f"{target}: cannot write the report ({e.strerror or e})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


# ---------------------------------------------------------------------------------------------
# cells


def _fmt(v: Any, column: str = "") -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        if column == "t" or (column.endswith("_s") and not column.endswith("_per_s")):  # seconds
            return f"{v:,.3f}"
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        if abs(v) >= 1:
            return f"{v:,.2f}"
        return f"{v:.3g}"
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(v)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _duration(seconds: float) -> str:
    """A duration for the eye: 7.216 s, 12 min 5 s, 25 h 6 min."""
    if seconds < 60:
        return f"{seconds:.3f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def _value(v: Any) -> str:
    """The exact value of a cell, for ``data-value``."""
    if isinstance(v, bool) or v is None:
        return ""
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, dt.datetime):
        return str((v - _EPOCH) // dt.timedelta(microseconds=1)) if v.tzinfo else v.isoformat()
    return ""


def _table(name: str, table: pa.Table, empty: str, columns: Sequence[str] | None = None) -> str:
    if table.num_rows == 0:
        return f'<p class="empty" data-table="{name}">{html.escape(empty)}</p>'
    # a list asked for with a limit says how long it is whole
    total = int((table.schema.metadata or {}).get(b"total_rows", table.num_rows))
    cols = list(columns or table.column_names)
    shown = table.slice(0, MAX_ROWS).select(cols).to_pylist()
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for row in shown:
        cells = []
        for c in cols:
            v = row[c]
            num = isinstance(v, int | float) and not isinstance(v, bool)
            value = _value(v)
            attr = f' data-value="{value}"' if value else ""
            cells.append(f"<td{attr}{' class=num' if num else ''}>{html.escape(_fmt(v, c))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = ""
    if total > MAX_ROWS:
        more = (
            f'<p class="more">{total - MAX_ROWS:,} more rows: '
            f"<code>arrowkafka.report.{name}(OUTDIR)</code> gives them all.</p>"
        )
    return (
        f'<div class="scroll"><table data-table="{name}" data-rows="{total}"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>{more}"
    )


# ---------------------------------------------------------------------------------------------
# plots


_COUNTER = [0]


def _svg(draw: Callable[[Any], None], width: float = 10.0, height: float = 3.2) -> str:
    """A matplotlib figure drawn by ``draw(figure)``, as inline SVG whose ids are its own."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "arrowkafka",
            # ids, names and topics are drawn as given: never parsed as math text ($...$)
            "text.parse_math": False,
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        fig = Figure(figsize=(width, height), layout="constrained")
        draw(fig)
        buf = io.StringIO()
        # no metadata: it would put a date and links to matplotlib.org, Creative Commons,
        # purl.org and w3.org into the page
        fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    _COUNTER[0] += 1
    prefix = f"f{_COUNTER[0]}-"
    text = text.replace('id="', f'id="{prefix}').replace("url(#", f"url(#{prefix}")
    text = text.replace('xlink:href="#', f'xlink:href="#{prefix}').replace(' href="#', f' href="#{prefix}')
    return f'<figure class="plot">{text}</figure>'


def _line(rows: list[dict[str, Any]], col: str, width_s: float) -> tuple[list[float], list[float]]:
    """x (bucket middles) and y of one series, broken (NaN) where buckets are missing: a line
    joins neighbouring buckets only."""
    xs: list[float] = []
    ys: list[float] = []
    last = None
    for r in sorted(rows, key=lambda r: r["bucket"]):
        if last is not None and r["bucket"] != last + 1:
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append(r["t"] + width_s / 2)
        ys.append(r[col])
        last = r["bucket"]
    return xs, ys


def _time_axis(ax: Any, seconds: float) -> None:
    span = max(seconds, 1e-3)
    ax.set_xlim(-0.01 * span, 1.03 * span)  # room for a marker or bar at either end
    ax.set_xlabel("seconds from the first frame")


def _latency_plot(lat: pa.Table, over: pa.Table, width_s: float, seconds: float) -> str:
    slowest = [(r["api"], r["version"]) for r in lat.sort_by([("p99_ms", "descending")]).to_pylist()][:LINES]
    rows = over.to_pylist()

    from matplotlib.ticker import FuncFormatter, NullFormatter

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 3, sharex=True, sharey=True)
        for ax, col, title in zip(axes, ("p50_ms", "p99_ms", "max_ms"), ("p50", "p99", "max"), strict=True):
            for api, version in slowest:
                mine = [r for r in rows if r["api"] == api and r["version"] == version]
                if mine:
                    xs, ys = _line(mine, col, width_s)
                    ax.plot(xs, ys, marker="o", markersize=3, linewidth=1, label=f"{api} v{version}")
            if all(r[col] > 0 for r in rows):  # a log scale takes no zero (a latency under 1 us)
                ax.set_yscale("log")
                # its own labels are math text, which the page turns off: plain numbers
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{title} latency (ms) per {width_s:g} s")
            _time_axis(ax, seconds)
            ax.grid(True, alpha=0.3)
        axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    return _svg(draw, 11.5, 3.4)


def _throughput_plot(over: pa.Table, width_s: float, seconds: float) -> str:
    rows = over.to_pylist()

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 2, sharex=True)
        for ax, col, title in zip(
            axes, ("records_per_s", "bytes_per_s"), ("records/s", "bytes/s"), strict=True
        ):
            for side, color in (("produce", "tab:blue"), ("fetch", "tab:orange")):
                per: dict[float, float] = {}
                for r in rows:
                    if r["side"] == side:
                        per[r["t"]] = per.get(r["t"], 0.0) + r[col]
                if per:
                    xs = sorted(per)
                    ax.bar(
                        [x + width_s / 2 + (-0.2 if side == "produce" else 0.2) * width_s for x in xs],
                        [per[x] for x in xs],
                        width=0.4 * width_s,
                        color=color,
                        label=side,
                    )
            ax.set_title(f"{title} (record batches), per {width_s:g} s")
            _time_axis(ax, seconds)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    return _svg(draw, 11.5, 3.2)


def _errors_plot(over: pa.Table, width_s: float, seconds: float) -> str:
    rows = over.to_pylist()
    totals: dict[tuple[str, str], int] = {}
    for r in rows:
        totals[(r["api"], r["error"])] = totals.get((r["api"], r["error"]), 0) + r["count"]
    top = sorted(sorted(totals), key=lambda k: -totals[k])
    if len(top) > KINDS:  # the rest drawn as one
        keep = set(top[: KINDS - 1])
        rows = [
            r if (r["api"], r["error"]) in keep else {**r, "api": "other", "error": "other errors"}
            for r in rows
        ]
    kinds = sorted({(r["api"], r["error"]) for r in rows})

    def draw(fig: Any) -> None:
        ax = fig.subplots()
        bottoms: dict[float, float] = {}
        for api, err in kinds:
            pts: dict[float, int] = {}
            for r in rows:
                if r["api"] == api and r["error"] == err:
                    pts[r["t"]] = pts.get(r["t"], 0) + r["count"]
            xs = sorted(pts)
            ax.bar(
                [x + width_s / 2 for x in xs],
                [pts[x] for x in xs],
                width=0.8 * width_s,
                bottom=[bottoms.get(x, 0) for x in xs],
                label=f"{api}: {err}",
            )
            for x in xs:
                bottoms[x] = bottoms.get(x, 0) + pts[x]
        ax.set_title(f"error codes in responses, per {width_s:g} s")
        _time_axis(ax, seconds)
        ax.set_ylabel("count")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    return _svg(draw, 11.5, 3.0)


_NO_MEMBERS = (
    "No JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat or ShareGroupHeartbeat "
    "requests in this capture."
)


def _group_plot(outdir: str | Path, start_us: int, seconds: float) -> str:
    lanes, members, dots = membership.member_lanes(outdir, start_us, seconds, LANES)
    shown = (
        f"the {len(lanes)} of {members} members with the most requests" if members > LANES else "each member"
    )
    points: dict[tuple[str, bool], list[tuple[float, int]]] = {}
    for d in dots.to_pylist():
        points.setdefault((d["api"], d["ok"]), []).append((d["t"], d["lane"]))
    marks = {"JoinGroup": "^", "SyncGroup": "s", "Heartbeat": ".", "LeaveGroup": "v",
             "ConsumerGroupHeartbeat": "d", "ShareGroupHeartbeat": "P"}  # fmt: skip
    assert set(marks) == set(compute.GROUP_APIS)

    def draw(fig: Any) -> None:
        ax = fig.subplots()
        for api, mark in marks.items():
            for ok in (True, False):
                if pts := sorted(points.get((api, ok), ())):
                    xs, ys = zip(*pts, strict=True)
                    ax.scatter(
                        xs,
                        ys,
                        marker=mark,
                        s=40 if mark != "." else 80,
                        color="tab:green" if ok else "tab:red",
                        label=f"{api} {'ok' if ok else 'error or no response'}",
                    )
        ax.set_yticks(range(len(lanes)), [f"{g} / {m[:40]}" for g, m in lanes], fontsize=7)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        _time_axis(ax, seconds)
        ax.set_title(f"group membership requests of {shown} (red: an error or no response)")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    return _svg(draw, 11.5, 1.2 + 0.35 * len(lanes))


# ---------------------------------------------------------------------------------------------
# the page


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1b1f24;
background:#fafbfc}
header{background:#24292f;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d1d9;font-size:13px}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #d0d7de;padding:6px 24px;font-size:13px;
z-index:2}nav a{margin-right:16px;color:#0969da;text-decoration:none}
main{padding:0 24px 40px}section{background:#fff;border:1px solid #d0d7de;border-radius:6px;margin:18px 0;
padding:8px 18px 14px}h2{font-size:17px;margin:10px 0}h3{font-size:14px;margin:16px 0 6px;color:#57606a}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;
min-width:110px}.card b{display:block;font-size:18px}.card span{font-size:12px;color:#57606a}
.scroll{overflow-x:auto;max-height:420px;overflow-y:auto}
table{border-collapse:collapse;font-size:12px;margin:4px 0}th{position:sticky;top:0;background:#f6f8fa;
text-align:left;border-bottom:1px solid #d0d7de;padding:3px 8px;white-space:nowrap}
td{border-bottom:1px solid #eaeef2;padding:2px 8px;white-space:nowrap}td.num{text-align:right;
font-variant-numeric:tabular-nums}
p.empty{color:#57606a;font-style:italic;margin:6px 0}p.more,p.note{font-size:12px;color:#57606a}
figure.plot{margin:6px 0}figure.plot svg{max-width:100%;height:auto}
#report-status{display:none}
"""

# Records any script error on the page (a browser test reads #report-status after load).
_HOOK = """<script>
window.reportErrors = [];
window.addEventListener("error", function (e) {
  window.reportErrors.push(String(e.message || e.type));
}, true);
window.addEventListener("load", function () {
  var s = document.getElementById("report-status");
  s.setAttribute("data-errors", String(window.reportErrors.length));
  s.setAttribute("data-sections", String(document.querySelectorAll("section[data-section]").length));
  s.textContent = window.reportErrors.join("\\n");
});
</script>"""

SECTION_TITLES = {
    "overview": "Capture at a glance",
    "latency": "Latency",
    "throughput": "Throughput",
    "errors": "Errors",
    "groups": "Consumer groups",
    "producers": "Producers and transactions",
}


def render_html(outdir: str | Path) -> str:
    """The whole report for the tables in ``outdir``, as one HTML string."""
    t0 = time.monotonic()
    tl = compute.timeline(outdir)
    width_s = tl.width_us / 1e6
    sections: dict[str, str] = {}

    # the capture at a glance
    ov_table = clients.overview(outdir)
    ov = ov_table.to_pylist()[0]
    cards = [
        ("duration", _duration(ov["duration_s"])),
        ("connections", _fmt(ov["connections"])),
        ("client ids", _fmt(ov["client_ids"])),
        ("brokers", _fmt(ov["brokers"])),
        ("requests", _fmt(ov["requests"])),
        ("responses", _fmt(ov["responses"])),
        ("frame bytes", _fmt(ov["frame_bytes"])),
        ("APIs / versions", f"{ov['apis']} / {ov['api_versions']}"),
        ("rejects", _fmt(ov["rejects"])),
        ("record batches", _fmt(ov["record_batches"])),
        ("records", _fmt(ov["records"])),
        ("record bytes", _fmt(ov["record_bytes"])),
    ]
    parts = [
        '<div class="cards">'
        + "".join(f"<div class=card><b>{html.escape(v)}</b><span>{k}</span></div>" for k, v in cards)
        + "</div>"
    ]
    parts.append(
        f'<p class="note">From {html.escape(_fmt(ov["first"]))} to {html.escape(_fmt(ov["last"]))} UTC, '
        f"{ov['captures']} capture file(s). Frame bytes are the decoded requests' and responses' bytes "
        "on the wire, size prefixes included (rejected frames apart); record bytes are the record "
        "batches' bytes on the wire.</p>"
    )
    parts.append(_table("overview", ov_table, "no frames"))
    parts.append("<h3>Connections and clients</h3>")
    parts.append(
        _table("connections", clients.connections(outdir, MAX_ROWS), "No connections in this capture.")
    )
    parts.append("<h3>APIs and versions</h3>")
    parts.append(_table("apis", compute.apis(outdir), "No requests or responses in this capture."))
    parts.append("<h3>Rejects</h3>")
    parts.append(
        _table("rejects", compute.rejects(outdir), "No rejects: every frame and record batch decoded.")
    )
    sections["overview"] = "".join(parts)

    # latency
    lat = latencies.latency(outdir)
    if lat.num_rows == 0:
        sections["latency"] = (
            '<p class="empty">No response in this capture has its request in it: no latency.</p>'
        )
    else:
        over = latencies.latency_over_time(outdir)
        sections["latency"] = "".join(
            [
                f"<p class=\"note\">Latency: the response's first segment minus its request's; time is the "
                f"request's. Plotted: the {min(LINES, lat.num_rows)} API versions with the highest p99.</p>",
                _latency_plot(lat, over, width_s, tl.seconds),
                "<h3>Per API and version</h3>",
                _table("latency", lat, ""),
                "<h3>Slowest requests</h3>",
                '<p class="note">Find one in the tables by client and correlation id, e.g. '
                "<code>SELECT * FROM '&lt;Api&gt;Response.parquet' WHERE _client = ... AND "
                "_correlation_id = ...</code></p>",
                _table("slowest", latencies.slowest(outdir), ""),
                "<h3>Per API, version and time</h3>",
                _table("latency_over_time", over, ""),
            ]
        )

    # throughput
    by_part = compute.throughput_by_partition(outdir)
    if by_part.num_rows == 0:
        sections["throughput"] = (
            '<p class="empty">No record batches in this capture (no Produce requests or Fetch responses carrying records).</p>'  # noqa: E501
        )
    else:
        over_t = compute.throughput_over_time(outdir)
        sections["throughput"] = "".join(
            [
                '<p class="note">From the decoded record batches of Produce requests (produce) and Fetch '
                "responses (fetch), whole data batches only (no control batch: its record is a transaction "
                "marker; no partial batch: a Fetch response cut inside it); bytes are the batches' bytes on "
                "the wire; per-second rates averaged over the whole "
                f"capture ({tl.seconds:,.3f} s) in the tables, per bucket in the plot.</p>",
                _throughput_plot(over_t, width_s, tl.seconds),
                "<h3>Per topic</h3>",
                _table("throughput_by_topic", compute.throughput_by_topic(outdir), ""),
                "<h3>Per topic and partition</h3>",
                _table("throughput_by_partition", by_part, ""),
                "<h3>Per client</h3>",
                _table("throughput_by_client", clients.throughput_by_client(outdir, MAX_ROWS), ""),
                "<h3>Compression</h3>",
                '<p class="note">ratio = uncompressed bytes / bytes sent, per codec, over the batches that '
                "decoded (undecoded: batches whose records could not be read).</p>",
                _table("compression", compute.compression(outdir), ""),
                "<h3>Per time, side and topic</h3>",
                _table("throughput_over_time", over_t, ""),
            ]
        )

    # errors
    errs = compute.errors(outdir)
    note = (
        f'<p class="note">Every response field named <code>error_code</code> or <code>*_error_code</code>, '
        f"at any depth; code 0 (NONE) left out. Names from Kafka's error table ({KAFKA_REVISION}).</p>"
    )
    if errs.num_rows == 0:
        sections["errors"] = (
            note + '<p class="empty">No error codes in this capture: every response said NONE.</p>'
        )
    else:
        over_e = compute.errors_over_time(outdir)
        sections["errors"] = "".join(
            [
                note,
                _errors_plot(over_e, width_s, tl.seconds),
                "<h3>Per API, version and field</h3>",
                _table("errors", errs, ""),
                "<h3>Per time</h3>",
                _table("errors_over_time", over_e, ""),
            ]
        )

    # consumer groups
    events = membership.group_events(outdir, MAX_ROWS)
    commits = offsets.committed_offsets(outdir)
    if events.num_rows == 0 and commits.num_rows == 0:
        sections["groups"] = (
            '<p class="empty">No consumer-group traffic in this capture: no JoinGroup, SyncGroup, '
            "Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, ShareGroupHeartbeat, OffsetCommit or "
            "OffsetFetch.</p>"
        )
    else:
        sections["groups"] = "".join(
            [
                _group_plot(outdir, tl.start_us, tl.seconds) if events.num_rows else "",
                "<h3>Membership requests per group and outcome</h3>",
                _table(
                    "group_summary",
                    membership.group_summary(outdir),
                    _NO_MEMBERS,
                ),
                "<h3>Members joining and leaving</h3>",
                _table(
                    "group_events",
                    events,
                    _NO_MEMBERS,
                ),
                "<h3>Committed offsets</h3>",
                _table(
                    "committed_offsets", commits, "No offset commits or OffsetFetch answers in this capture."
                ),
                "<h3>Lag</h3>",
                '<p class="note">The committed offset is the last one the group held: an OffsetCommit '
                "the broker accepted, a TxnOffsetCommit once its transaction committed, or an OffsetFetch "
                "answer; its time is when the capture first shows the group holding it. "
                "lag = the last high watermark a Fetch response gave - that offset, where its capture "
                "file holds both for a partition; unknown where the watermark was seen before that "
                "time (records may have come since).</p>",
                _table(
                    "lag",
                    offsets.lag(outdir),
                    "No partition has both a committed offset and a high watermark in this capture.",
                ),
            ]
        )

    # producers
    prods = producing.producers(outdir, MAX_ROWS)
    txns = producing.transactions(outdir, MAX_ROWS)
    marks = producing.markers(outdir, MAX_ROWS)
    if prods.num_rows == 0 and txns.num_rows == 0 and marks.num_rows == 0:
        sections["producers"] = (
            '<p class="empty">No producer ids in this capture: no produced record batch '
            "carries one (idempotent or transactional producers set it), no EndTxn "
            "requests, no transaction markers.</p>"
        )
    else:
        sections["producers"] = "".join(
            [
                "<h3>Producer ids and epochs</h3>",
                _table("producers", prods, "No produced record batch carries a producer id in this capture."),
                "<h3>Sequences per partition</h3>",
                '<p class="note">In capture order per producer id, epoch and partition: a gap is a batch '
                "past the expected sequence (the previous batch's base + its records); a duplicate one at or "
                "before "
                "it (a retry).</p>",
                _table(
                    "sequences",
                    producing.sequences(outdir, MAX_ROWS),
                    "No produced record batch carries a producer id in this capture.",
                ),
                "<h3>Transactions (EndTxn)</h3>",
                _table("transactions", txns, "No EndTxn requests in this capture."),
                "<h3>Transaction markers</h3>",
                _table("markers", marks, "No COMMIT or ABORT markers in the record batches of this capture."),
            ]
        )

    nav = "".join(f'<a href="#{k}">{html.escape(v)}</a>' for k, v in SECTION_TITLES.items())
    body = "".join(
        f'<section id="{k}" data-section="{k}"><h2>{html.escape(SECTION_TITLES[k])}</h2>'
        f"{sections[k]}</section>"
        for k in SECTION_TITLES
    )
    made = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    where = html.escape(str(Path(outdir).resolve()))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>arrowkafka report: {html.escape(Path(outdir).resolve().name)}</title>"
        f"{_HOOK}<style>{_STYLE}</style>"
        f"</head><body><header><h1>Kafka capture report</h1><p>{where} · made {made} UTC in "
        f"{time.monotonic() - t0:.2f} s by arrowkafka · every number here is also an Arrow table: "
        "<code>arrowkafka.report</code></p></header>"
        f'<nav>{nav}</nav><main>{body}</main><div id="report-status"></div></body></html>\n'
    )
