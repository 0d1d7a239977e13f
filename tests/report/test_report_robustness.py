"""The report on captures it must not trip over: one direction only (no response tables, or one
missing), ids and names that look like matplotlib's math text, and a page that names no
address outside itself."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import arrowkafka.report as rep
from arrowkafka.cli import main
from arrowkafka.report.present import _fmt
from tests.report.conftest import CAPTURES
from tests.report.reporthtml import read_report


def _copy(folder: Path, to: Path, leave_out: set[str] = frozenset()) -> Path:  # type: ignore[assignment]
    to.mkdir()
    for p in folder.glob("*.parquet"):
        if p.stem not in leave_out:
            shutil.copy(p, to)
    return to


def _responses(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*Response.parquet"))


def _every_table(folder: Path) -> dict[str, pa.Table]:
    return {f.__name__: f(folder) for functions in rep.SECTIONS.values() for f in functions}


def test_each_response_table_missing_in_turn(decoded: dict[str, Path], tmp_path: Path) -> None:
    """Requests whose responses are not in the capture keep their rows, the answer null."""
    folder = decoded["tansu_confluent"]
    for i, response in enumerate(_responses(folder)):
        out = _copy(folder, tmp_path / str(i), {response})
        tables = _every_table(out)
        api = response[: -len("Response")]
        if api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"):
            mine = tables["group_events"].filter(pc.equal(tables["group_events"]["api"], api))
            assert mine.num_rows > 0 and mine["error_code"].null_count == mine.num_rows, response
        if api == "EndTxn":
            assert tables["transactions"].num_rows == 1 and tables["transactions"]["error"].to_pylist() == [
                None
            ]
        if api == "InitProducerId":  # the transactional id comes from its response
            assert tables["producers"]["transactional_id"].null_count == tables["producers"].num_rows
        if api == "OffsetCommit":
            assert set(tables["committed_offsets"]["accepted"].to_pylist()) == {0}


@pytest.mark.parametrize("capture", CAPTURES)
def test_a_capture_of_requests_only(decoded: dict[str, Path], tmp_path: Path, capture: str) -> None:
    """Only client -> broker captured: every section still renders, from the command too."""
    folder = decoded[capture]
    out = _copy(folder, tmp_path / "requests", set(_responses(folder)))
    tables = _every_table(out)
    assert tables["latency"].num_rows == 0 and tables["group_events"].num_rows > 0
    assert tables["group_events"]["error"].null_count == tables["group_events"].num_rows
    assert main(["report", str(out)]) == 0
    report = read_report(out / "report.html")
    assert list(report.sections) == list(rep.SECTIONS)
    assert report.tables["group_summary"] and {r[2] for r in report.tables["group_summary"]} == {
        "NO_RESPONSE"
    }


HOSTILE = {
    "group_id": r"orders$\frac{x$",
    "member_id": "cost$x^2$",
    "_client_id": r"client$\alpha$",
    "topic": "topic$x_{1}$",
}


def _rewrite(path: Path) -> None:
    """Every non-null, non-empty value of a top-level column named in HOSTILE replaced."""
    t = pq.read_table(path)
    for name, value in HOSTILE.items():
        if name in t.column_names:
            col = t[name]
            keep = pc.or_kleene(pc.is_null(col), pc.equal(col, ""))
            t = t.set_column(
                t.schema.get_field_index(name), t.schema.field(name), pc.if_else(keep, col, value)
            )
    pq.write_table(t, path)


def test_ids_that_look_like_math_text(decoded: dict[str, Path], tmp_path: Path) -> None:
    """Group, member and client ids and topics are drawn as written: ``$\\frac{x$`` (which math
    text cannot parse) and ``$x^2$`` (which it would draw as a formula) are plain text."""
    out = _copy(decoded["tansu_confluent"], tmp_path / "hostile")
    for p in out.glob("*.parquet"):
        _rewrite(p)
    assert set(rep.group_events(out)["group_id"].to_pylist()) == {HOSTILE["group_id"]}
    assert HOSTILE["member_id"] in rep.group_events(out)["member_id"].to_pylist()
    assert main(["report", str(out)]) == 0
    text = (out / "report.html").read_text(encoding="utf-8")
    svgs = "".join(re.findall(r"<svg.*?</svg>", text, re.S))
    # the membership plot's lanes: "group / member", as text in the SVG (svg.fonttype none)
    assert f"{HOSTILE['group_id']} / {HOSTILE['member_id']}" in svgs
    report = read_report(out / "report.html")
    assert HOSTILE["_client_id"] in report.sections["overview"]
    assert HOSTILE["topic"] in report.sections["throughput"]


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_page_names_no_address_outside_itself(decoded: dict[str, Path], capture: str) -> None:
    """No link, license or date from matplotlib's SVG metadata: the only URLs are the SVG and
    XLink namespaces, which name the vocabulary and fetch nothing."""
    text = (decoded[capture] / "report.html").read_text(encoding="utf-8")
    namespaces = re.compile(r'xmlns(:\w+)?="https?://[^"]*"')
    assert re.findall(r"https?://", namespaces.sub("", text)) == []
    assert "<metadata" not in text and "<dc:date" not in text


def test_rates_are_not_seconds() -> None:
    """A ``*_per_s`` column is a rate (digits as any number), a ``*_s`` one seconds (3 decimals)."""
    assert _fmt(12345.678, "records_per_s") == "12,346" and _fmt(0.5, "bytes_per_s") == "0.5"
    assert _fmt(12345.678, "duration_s") == "12,345.678" and _fmt(0.5, "t") == "0.500"


@pytest.mark.parametrize("capture", CAPTURES)
def test_no_math_markup_is_drawn_as_text(decoded: dict[str, Path], capture: str) -> None:
    """Math text is off (ids are drawn as given), so no label may rely on it: a log axis's own
    labels (10^-1, ...) once came out as their markup, ``$\\mathdefault{10^{-1}}$``."""
    text = (decoded[capture] / "report.html").read_text(encoding="utf-8")
    assert "mathdefault" not in text and "$" not in re.sub(r"<script.*?</script>", "", text, flags=re.S)


# the lists the page cuts to their first rows
LISTS = [
    "connections",
    "throughput_by_client",
    "group_events",
    "transactions",
    "producers",
    "sequences",
    "markers",
]


@pytest.mark.parametrize("name", LISTS)
def test_a_list_cut_to_its_first_rows(decoded: dict[str, Path], name: str) -> None:
    """What the page asks of a list: its first rows, and how many the whole list has."""
    for folder in decoded.values():
        full = getattr(rep, name)(folder)
        assert b"total_rows" not in (full.schema.metadata or {})
        for k in (0, 1, 3):
            cut = getattr(rep, name)(folder, k)
            assert int(cut.schema.metadata[b"total_rows"]) == full.num_rows, (folder, k)
            assert cut.replace_schema_metadata(full.schema.metadata).equals(full.slice(0, k)), (folder, k)


def test_the_page_says_how_long_a_cut_list_is() -> None:
    from arrowkafka.report import present

    cut = pa.table({"x": list(range(present.MAX_ROWS))}).replace_schema_metadata({b"total_rows": b"500"})
    page = present._table("x", cut, "")
    assert 'data-rows="500"' in page and f"{500 - present.MAX_ROWS:,} more rows" in page
