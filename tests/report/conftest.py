"""The real captures in ../shared/captures decoded once per session, with their reports."""

from __future__ import annotations

from pathlib import Path

import pytest

import arrowkafka as ak
from arrowkafka.cli import main
from arrowkafka.traffic.parquet import decode_capture

CAPTURES = ("tansu_confluent", "noida_kafka_python", "kafka091_legacy")


@pytest.fixture(scope="session")
def decoded(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """capture name -> the folder its tables were decoded to (and ``report.html`` written in, by
    the command)."""
    folders = {}
    for capture in CAPTURES:
        folders[capture] = tmp_path_factory.mktemp(capture)
        decode_capture([shared / "captures" / f"{capture}.pcap"], folders[capture], ak.load_specs())
        assert main(["report", str(folders[capture])]) == 0
        assert (folders[capture] / "report.html").is_file()
    return folders
