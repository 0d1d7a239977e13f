"""What a capture job saw and wrote (``Summary``: frames in = rows + rejects, per API and
version), and the one way a row of ``rejects`` is added."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arrowkafka.traffic.columns import ends_of
from arrowkafka.traffic.frames import CaptureStats, PartialFrame, SkippedBytes, frame_pieces

__all__ = ["Summary", "add_item_rejects", "add_reject", "add_truncation_reject"]


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
        verdict = "all accounted for" if self.frames_in == self.rows + self.rejects else "MISMATCH"
        if cut and verdict != "MISMATCH":
            verdict += ", but a capture file was cut"
        lines.append(f"\nframes in {self.frames_in} = rows {self.rows} + rejects {self.rejects} ({verdict})")
        for c in cut:
            lines.append(
                f"capture cut: the file ends {c.truncated_bytes} bytes into a packet record"
                " (not read: see rejects)"
            )
        if self.record_batches:
            lines.append(f"records {self.records} in {self.record_batches} batches"
                         f" ({self.record_rejects} batches rejected)")  # fmt: skip
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
    """A partial frame or skipped bytes to rejects, counted as the frames they hold (skipped
    bytes cut into whole frames where they are frames)."""
    data = bytes(item.data)
    pieces = frame_pieces(data, item.direction) if isinstance(item, SkippedBytes) else [data]
    where = {**ends_of(item.conn), "direction": item.direction, "ts": getattr(item, "ts_first_ns", None)}
    for raw in pieces:
        summary.frames_in += 1
        add_reject(summary, rejects, capture, "Partial", item.reason, raw, **where)


def add_truncation_reject(
    summary: Summary, rejects: list[dict[str, Any]], capture: str, stats: CaptureStats
) -> None:
    """A capture file cut in the middle of a packet record: a row of rejects saying so (the
    record's packet, and whatever frame bytes it carried, were not read)."""
    if stats.truncated_bytes:
        summary.frames_in += 1
        reason = f"capture file cut: it ends {stats.truncated_bytes} bytes into a packet record, not read"
        add_reject(summary, rejects, capture, "Truncated", reason, None)
