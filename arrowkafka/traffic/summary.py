"""What a capture job saw and wrote (``Summary``: frames in = rows + rejects, per API and
version), and the one way a row of ``_rejects`` is added."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arrowkafka.traffic.frames import CaptureStats

__all__ = ["Summary", "add_reject"]


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
        lines.append(
            f"\nframes in {self.frames_in} = rows {self.rows} + rejects {self.rejects}"
            f" ({'all accounted for' if self.frames_in == self.rows + self.rejects else 'MISMATCH'})"
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
    raw: bytes,
    **where: Any,
) -> None:
    """One row of _rejects; ``where`` holds the REJECT_SCHEMA columns that are known."""
    summary.rejects += 1
    rejects.append({"capture": capture, "error": error, "reason": reason, "raw": raw, **where})
