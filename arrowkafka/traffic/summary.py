"""What a capture job saw and wrote (``Summary``: frames in = rows + rejects, per API and
version), and the one way a row of ``rejects`` is added.

Each cause of a reject has one ``error`` and one ``reason``, whichever path (the Python steps
or the kernels) and however the capture is cut into chunks:

================== ================================================== ==================================
error              reason                                             cause
================== ================================================== ==================================
Unmatched          no request with this correlation id in the capture a whole response whose request is
                                                                      not in the capture (sent before it
                                                                      began, or lost): framed, or among
                                                                      the bytes skipped by a resync
Partial            resync                                             bytes no frame could be placed on:
                                                                      the torn end of a frame whose
                                                                      start was not captured (mid-stream
                                                                      start, gap), or a request side's
                                                                      bytes before its first proven frame
Partial            bad size                                           a size prefix out of range where a
                                                                      frame should start (its 1st byte)
Partial            gap                                                a frame's bytes before a gap in it
Partial            after gap                                          a frame's bytes after a gap in it
Partial            capture end, fin, rst, idle, reused                a frame cut by the end of its TCP
                                                                      direction, named by how it ended
                                                                      (``tcp.StreamEnd``)
Truncated          capture file cut: the file ends N bytes into ...   the file ends inside a packet record
CaptureFormatError capture framing broken: the packet records ...     a record's framing broken part-way:
                                                                      the rest of the file is not read
DecodeError, ...   the error's message                                a header that does not parse, an
                                                                      unknown API key or version
================== ================================================== ==================================

The two capture rows keep the unread bytes in ``raw`` (up to ``pcap.TAIL_KEEP``) and their
file position in the byte-offset column; the summary prints a line for each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from arrowkafka.output import Causes, frames_line, record_lines
from arrowkafka.traffic.columns import ends_of
from arrowkafka.traffic.frames import CaptureStats, PartialFrame, SkippedBytes, frame_pieces
from arrowkafka.traffic.pcap import TAIL_KEEP

__all__ = ["UNMATCHED", "Summary", "add_item_rejects", "add_reject", "add_truncation_reject"]

UNMATCHED = "no request with this correlation id in the capture"


@dataclass
class Summary:
    """What the job saw and wrote."""

    frames_in: int = 0
    rows: int = 0
    rejects: int = 0
    # (api, version) -> requests, responses, bytes, rejects, and latency: a list of arrays of
    # ns, one per chunk (``latencies`` joins them)
    per_api: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)  # message -> rows written
    capture_stats: list[CaptureStats] = field(default_factory=list)
    # the records inside Produce requests and Fetch responses; rejected batches are not frames,
    # so they stay out of the frame count above
    record_batches: int = 0
    records: int = 0
    record_rejects: int = 0
    # KRaft control records written (a controller's Fetch of the metadata log), per table
    control: dict[str, int] = field(default_factory=dict)
    causes: Causes = field(default_factory=Causes)  # rows of rejects (frames, record batches) by cause
    # messages whose specs hold no records field where a topic's partitions would (user's specs)
    records_not_found: set[str] = field(default_factory=set)

    def latencies(self, api: str, version: int) -> np.ndarray:
        """Every response's latency (ns) for an API and version, in capture order."""
        parts = self.per_api.get((api, version), {}).get("latency", [])
        return np.concatenate([np.asarray(x, np.int64) for x in parts]) if parts else np.zeros(0, np.int64)

    def render(self) -> str:
        lines = [f"{'api':<28} {'ver':>3} {'requests':>8} {'responses':>9} {'bytes':>10} {'rejects':>7} "
                 f"{'p50 ms':>8} {'p99 ms':>8}"]  # fmt: skip
        for (api, version), s in sorted(self.per_api.items()):
            lat = self.latencies(api, version) / 1e6
            p50, p99 = (
                (f"{np.percentile(lat, 50):8.2f}", f"{np.percentile(lat, 99):8.2f}")
                if lat.size
                else ("-", "-")
            )
            lines.append(f"{api:<28} {version:>3} {s['requests']:>8} {s['responses']:>9} {s['bytes']:>10} "
                         f"{s['rejects']:>7} {p50:>8} {p99:>8}")  # fmt: skip
        cut = [c for c in self.capture_stats if c.truncated_bytes]
        broken = [c for c in self.capture_stats if c.broken_offset is not None]
        buts = ["a capture file was cut"] * bool(cut) + ["a capture file's framing broke"] * bool(broken)
        lines.append("\n" + frames_line(self.frames_in, self.rows, self.rejects, buts))
        for c in cut:
            lines.append(f"capture cut: {_cut_text(c)} (not read: see rejects)")
        for c in broken:
            lines.append(f"capture framing broken: {_broken_text(c)} (see rejects)")
        for c in self.capture_stats:
            if c.tcp.invalid_segments:  # not frames, so in no count above
                where = f" in {c.name}" if c.name else ""
                lines.append(
                    f"TCP segments ignored{where}: {c.tcp.invalid_segments} with SYN and FIN or RST"
                    f" ({c.tcp.invalid_bytes} payload bytes), as a receiver ignores them"
                )
        lines += record_lines(self.records, self.record_batches, self.record_rejects, self.control)
        if self.records_not_found:
            lines.append(f"records not read in {', '.join(sorted(self.records_not_found))}: the specs given"
                         " hold no records field in a topic's partitions")  # fmt: skip
        lines += self.causes.lines()
        return "\n".join(lines)


def add_reject(
    summary: Summary,
    rejects: list[dict[str, Any]],
    capture: str,
    error: str,
    reason: str,
    raw: bytes | None,
    **where: Any,
) -> None:
    """One row of rejects; ``where`` holds the REJECT_SCHEMA columns that are known."""
    summary.rejects += 1
    rejects.append({"capture": capture, "error": error, "reason": reason, "raw": raw, **where})


def add_item_rejects(
    summary: Summary, rejects: list[dict[str, Any]], capture: str, item: PartialFrame | SkippedBytes
) -> None:
    """A partial frame or skipped bytes to rejects, counted as the frames they hold: skipped
    response bytes are cut into the whole frames they end with (``frame_pieces``) and what
    comes before them. A whole response among skipped bytes is one whose request the capture
    lacks (the framer starts a response stream at the first that answers a request it saw): it
    gets the reason pairing gives such a response (see the module docs)."""
    data = bytes(item.data)
    where = {**ends_of(item.conn), "direction": item.direction, "ts": getattr(item, "ts_first_ns", None)}
    if not isinstance(item, SkippedBytes):
        summary.frames_in += 1
        add_reject(summary, rejects, capture, "Partial", item.reason, data, **where)
        return
    # Skipped request bytes hold no request: the framer resyncs at the first start the next
    # request confirms. A walk of size prefixes there is a field that ends a torn frame.
    head, frames = frame_pieces(data, item.direction) if item.direction == "response" else (data, [])
    if head:
        summary.frames_in += 1
        add_reject(summary, rejects, capture, "Partial", item.reason, head, **where)
    for raw in frames:
        summary.frames_in += 1
        if item.direction == "response" and item.reason == "resync":
            # as pairing keeps an unmatched frame: after its size prefix
            add_reject(summary, rejects, capture, "Unmatched", UNMATCHED, raw[4:], **where)
        else:
            add_reject(summary, rejects, capture, "Partial", item.reason, raw, **where)


def _of(c: CaptureStats) -> str:
    return f" of {c.name}" if c.name else ""


def _cut_text(c: CaptureStats) -> str:
    end = (c.truncated_offset or 0) + c.truncated_bytes
    return (
        f"the file ends {c.truncated_bytes} bytes into a packet record, at byte {end}{_of(c)}"
        f" (the record starts at byte {c.truncated_offset})"
    )


def _broken_text(c: CaptureStats) -> str:
    return (
        f"the packet records break at byte {c.broken_offset}{_of(c)} ({c.broken_reason}); the"
        f" {c.broken_bytes} bytes from there to the end of the file were not read"
    )


def _kept(c: CaptureStats, n: int) -> str:
    """What the reject's raw holds of the ``n`` bytes not read."""
    return (
        "raw holds them" if len(c.tail) >= n else f"raw holds the first {len(c.tail)} (the cap: {TAIL_KEEP})"
    )


def add_truncation_reject(
    summary: Summary, rejects: list[dict[str, Any]], capture: str, stats: CaptureStats
) -> None:
    """The end of a capture file that was not read, as one row of rejects (counted as one frame
    in): a file cut in the middle of a packet record (``Truncated``), or whose framing broke
    part-way (``CaptureFormatError``: the packets before the break were read). The record's
    packet, and whatever frame bytes it carried, were not read; ``raw`` keeps its bytes, up to
    ``pcap.TAIL_KEEP``."""
    c = replace(stats, name=capture)
    if c.truncated_bytes:
        summary.frames_in += 1
        reason = f"capture file cut: {_cut_text(c)}; not read, {_kept(c, c.truncated_bytes)}"
        add_reject(summary, rejects, capture, "Truncated", reason, c.tail, byte_offset=c.truncated_offset)
    elif c.broken_offset is not None:
        summary.frames_in += 1
        reason = f"capture framing broken: {_broken_text(c)}; {_kept(c, c.broken_bytes)}"
        add_reject(
            summary, rejects, capture, "CaptureFormatError", reason, c.tail, byte_offset=c.broken_offset
        )
