"""The report in a real browser: Debian's Chromium, headless, offline (every host name resolves to
nothing), opens each report from a file:// URL; every section rendered, no script error on the
page (the report's own hook records them in #report-status), and a screenshot kept as a test
artifact (in the test's tmp folder, and copied to $ARROWKAFKA_ARTIFACTS when set).

Chromium is installed from Debian's packages if missing (as tests/traffic/live_env.py installs
tcpdump); a machine where that fails fails the test, saying why."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tests.report.conftest import CAPTURES
from tests.report.reporthtml import read_report

pytestmark = pytest.mark.slow

SECTIONS = ["overview", "latency", "throughput", "errors", "groups", "producers"]


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, check=False)
            if r.returncode:
                pytest.fail(
                    f"Chromium is missing and `{' '.join(cmd)}` failed ({r.returncode}): {r.stderr[-1500:]}"
                )
        found = shutil.which("chromium")
        if found is None:
            pytest.fail("Chromium is missing and Debian's chromium package did not install /usr/bin/chromium")
    return found


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
        f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no name resolves
        "--virtual-time-budget=5000", *args,
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _status(dom: str) -> dict[str, str]:
    m = re.search(r'<div id="report-status"([^>]*)>(.*?)</div>', dom, re.S)
    assert m, "no #report-status in the page"
    attrs = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', m.group(1)))
    return {**attrs, "text": m.group(2)}


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_section_renders_without_a_script_error(
    capture: str, decoded: dict[str, Path], chromium: str, tmp_path: Path
) -> None:
    page = decoded[capture] / "report.html"
    url = page.resolve().as_uri()
    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", url).stdout
    status = _status(dom)
    assert status["data-errors"] == "0" and status["text"] == "", status  # the hook ran, and saw nothing
    assert status["data-sections"] == str(len(SECTIONS))
    (tmp_path / "dom.html").write_text(dom, encoding="utf-8")
    shown = read_report(tmp_path / "dom.html")  # the page as the browser built it
    assert list(shown.sections) == SECTIONS
    for section in SECTIONS:
        has = [t for t in shown.tables if t in {f.__name__ for f in _functions(section)}]
        assert has or section in shown.section_empty, (
            f"{section}: neither a table nor a sentence saying why not"
        )
    assert shown.tables == read_report(page).tables  # every cell survived the browser's parse
    assert shown.figures["latency"] == 1 and shown.figures["throughput"] == 1

    shot = tmp_path / f"report-{capture}.png"
    _browser(chromium, tmp_path / "profile", "--window-size=1400,9000", f"--screenshot={shot}", url)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 9000)
    top = image.crop((0, 0, 1400, 3000)).resize((350, 750))
    assert (
        len(top.getcolors(maxcolors=1 << 20) or []) > 200
    )  # drawn: text, tables and plots, not a blank page
    if artifacts := os.environ.get("ARROWKAFKA_ARTIFACTS"):
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, artifacts)


def test_the_error_hook_sees_a_script_error(decoded: dict[str, Path], chromium: str, tmp_path: Path) -> None:
    """The check above means something: a page with a broken script says so in #report-status."""
    text = (decoded["tansu_confluent"] / "report.html").read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(text.replace("</body>", "<script>noSuchFunction();</script></body>"), encoding="utf-8")
    status = _status(_browser(chromium, tmp_path / "profile", "--dump-dom", broken.as_uri()).stdout)
    assert status["data-errors"] == "1" and "noSuchFunction" in status["text"], status


def _functions(section: str) -> list:
    import arrowkafka.report as rep

    return rep.SECTIONS[section]
