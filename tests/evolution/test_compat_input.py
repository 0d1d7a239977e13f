"""``compat``'s two sides: folders, git revisions (read without a checkout), and bad input,
which gets one line naming the file and exit status 2 (not 1, "incompatible")."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from arrowkafka.cli import main
from tests.evolution.conftest import MESSAGES, MakePair, Specs, field, spec_json, write

TRUNK = MESSAGES.parents[5]  # the whole kafka-specs folder


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command; it must exit 2 with one line on stderr and nothing on stdout."""
    assert main(["compat", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1, out.err
    assert "Traceback" not in out.err
    assert lines[0].startswith("arrowkafka: error: ")
    return lines[0].removeprefix("arrowkafka: error: ")


# ---- folders ------------------------------------------------------------------------------------


def test_missing_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert fails(capsys, str(tmp_path / "nope"), str(TRUNK)) == f"{tmp_path / 'nope'}: no such folder"
    assert fails(capsys, str(TRUNK), str(tmp_path / "nope")) == f"{tmp_path / 'nope'}: no such folder"


def test_a_file_is_not_a_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text("{}")
    assert fails(capsys, str(tmp_path / "f.json"), str(TRUNK)) == f"{tmp_path / 'f.json'}: not a folder"


def test_folder_without_specs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("no specs here")
    assert fails(capsys, str(tmp_path), str(TRUNK)) == f"{tmp_path}: holds no spec files (*.json)"


def test_spec_the_loader_refuses(capsys: pytest.CaptureFixture[str], make_pair: MakePair) -> None:
    def broken(s: Specs) -> None:
        s["MetadataRequest"]["validVersions"] = "0-x"

    old, new = make_pair(["MetadataRequest"], broken)
    message = fails(capsys, str(old), str(new))
    assert message.startswith(
        f"{new / 'MetadataRequest.json'}: MetadataRequest: validVersions: bad version range"
    )


# KIP-482's rules on one side alone (taggedVersions open-ended and inside flexibleVersions, a
# tag used once per struct) are the strict loader's: a side that breaks them is refused, naming
# the file and the field, before anything is compared.
@pytest.mark.parametrize(
    ("edit", "rule"),
    [
        ({"taggedVersions": "3-4"}, "taggedVersions must be open-ended (N+), got 3-4"),
        ({"taggedVersions": "2+", "versions": "2+"}, "taggedVersions 2+ reach outside flexibleVersions 3+"),
        ({"tag": 2}, "tag 2 is used twice in one struct (also by FinalizedFeatures)"),
    ],
)
def test_kip482_rules_of_one_side(
    capsys: pytest.CaptureFixture[str], make_pair: MakePair, edit: dict[str, str], rule: str
) -> None:
    old, new = make_pair(
        ["ApiVersionsResponse"], lambda s: field(s["ApiVersionsResponse"], "ZkMigrationReady").update(edit)
    )
    message = fails(capsys, str(old), str(new))
    assert message == f"{new / 'ApiVersionsResponse.json'}: ApiVersionsResponse.ZkMigrationReady: {rule}"


# ---- git revisions ------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A spec repository of three commits: v1 (upstream MetadataRequest/Response under
    specs/), v2 (an untagged field added to released versions), then a work tree edit that is
    not committed (compat must not see it)."""
    if shutil.which("git") is None:
        pytest.fail("git is needed for these tests")
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    specs = {n: spec_json(n) for n in ("MetadataRequest", "MetadataResponse")}
    write(root / "specs", specs)
    (root / "notes.txt").write_text("not a spec")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "v1")
    git(root, "tag", "v1")
    field(specs["MetadataResponse"], "Brokers")["fields"].append(
        {"name": "Zone", "type": "int16", "versions": "3+"}
    )
    write(root / "specs", specs)
    git(root, "commit", "-q", "-am", "v2")
    git(root, "tag", "v2")
    specs["MetadataRequest"]["validVersions"] = "5-12"  # uncommitted
    write(root / "specs", specs)
    return root


def test_git_revisions(capsys: pytest.CaptureFixture[str], repo: Path) -> None:
    assert main(["compat", "--git", str(repo), "v1:specs", "v2:specs", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(c["kind"], c["message"], c["versions"], c["path"], c["rule"]) for c in report["changes"]] == [
        ("field-added", "MetadataResponse", "3-12", "MetadataResponse.Brokers.Zone", "released-version")
    ]
    assert report["old"] == f"{repo}@v1:specs"
    # any revision syntax git takes, a folder with a trailing slash, or the whole tree
    assert main(["compat", "--git", str(repo), "HEAD~1", "HEAD:specs/"]) == 1
    assert "1 incompatible" in capsys.readouterr().out
    assert main(["compat", "--git", str(repo), "v2:specs", "HEAD:specs"]) == 0  # not the work tree
    assert capsys.readouterr().out.strip().endswith("all compatible")
    assert git(repo, "status", "--porcelain") == "M specs/MetadataRequest.json"  # left as it was


def test_git_bad_input(capsys: pytest.CaptureFixture[str], repo: Path, tmp_path: Path) -> None:
    assert fails(capsys, "--git", str(repo), "v1", "v9") == f"{repo}: unknown git revision 'v9'"
    assert (
        fails(capsys, "--git", str(repo), "v1:nope", "v2")
        == f"{repo}: v1:nope: no such folder at that revision"
    )
    plain = tmp_path / "plain"
    plain.mkdir()
    assert fails(capsys, "--git", str(plain), "v1", "v2") == f"{plain}: not a git repository"
    assert (
        fails(capsys, "--git", str(tmp_path / "gone"), "v1", "v2") == f"{tmp_path / 'gone'}: no such folder"
    )
    # a spec the strict loader refuses, at a revision: named REV:path
    (repo / "specs" / "Bad.json").write_text(
        '{"name": "Bad", "type": "data", "validVersions": "0", "oops": 1}'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "bad")
    assert (
        fails(capsys, "--git", str(repo), "v1", "HEAD:specs")
        == "HEAD:specs/Bad.json: $: unknown key 'oops' in message"
    )
    # a revision without specs
    git(repo, "rm", "-q", "-r", "specs")
    git(repo, "commit", "-q", "-m", "none")
    assert fails(capsys, "--git", str(repo), "v1", "HEAD") == f"{repo}: HEAD: holds no spec files (*.json)"


def test_git_without_a_folder_reads_kafkas_spec_folders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """REV alone, in a tree laid out as Kafka's (specs under <module>/src/main/resources/common/
    message or .../metadata, beside other JSON: build files, test specs): those folders only."""
    root = tmp_path / "kafka"
    root.mkdir()
    git(root, "init", "-q")
    write(
        root / "clients/src/main/resources/common/message", {"MetadataRequest": spec_json("MetadataRequest")}
    )
    write(
        root / "clients/src/test/resources/common/message",
        {"MetadataResponse": spec_json("MetadataResponse")},
    )
    (root / "tests").mkdir()
    (root / "tests" / "settings.json").write_text('{"not": "a spec"}')
    (root / ".github").mkdir()
    (root / ".github" / "labels.json").write_text('{"not": "a spec either"}')
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "v1")
    assert main(["compat", "--git", str(root), "HEAD", "HEAD"]) == 0
    assert (
        capsys.readouterr().out.strip()
        == f"0 changes from {root}@HEAD (1 messages) to {root}@HEAD (1 messages): all compatible"
    )
    assert (
        fails(capsys, "--git", str(root), "HEAD:tests", "HEAD")
        == "HEAD:tests/settings.json: $: unknown key 'not' in message"
    )
    # a tree without Kafka's folders: every *.json, but those in hidden folders
    git(root, "rm", "-q", "-r", "tests")
    (root / "specs").mkdir()
    for spec in root.glob("clients/src/*/resources/common/message/*.json"):
        git(root, "mv", str(spec.relative_to(root)), f"specs/{spec.name}")
    git(root, "commit", "-q", "-m", "v2")
    assert main(["compat", "--git", str(root), "HEAD", "HEAD"]) == 0
    assert "(2 messages)" in capsys.readouterr().out  # (.github's JSON not read)
