"""Reading a report back: its sections, and each table's cells (a number cell's exact value from
``data-value``, any other cell's text), with the standard library's HTML parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path


@dataclass
class Report:
    sections: dict[str, str] = field(default_factory=dict)  # name -> its text
    tables: dict[str, list[list[str]]] = field(default_factory=dict)  # name -> rows of cells
    rows: dict[str, int] = field(default_factory=dict)  # name -> data-rows (all, shown or not)
    empty: dict[str, str] = field(default_factory=dict)  # name -> the sentence saying there is none
    section_empty: dict[str, str] = field(default_factory=dict)  # section -> its "none" sentence
    figures: dict[str, int] = field(default_factory=dict)  # section -> inline SVG plots
    scripts: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)  # src= or href= to anything but #anchors


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.out = Report()
        self.section: str | None = None
        self.table: str | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None
        self.cell_value: str | None = None
        self.empty: tuple[str | None, list[str]] | None = None
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for k in ("src", "href"):
            if a.get(k) and not str(a[k]).startswith("#"):
                self.out.external.append(str(a[k]))
        if tag == "section" and a.get("data-section"):
            self.section = a["data-section"]
            self.out.sections[self.section] = ""
            self.out.figures[self.section] = 0
        elif tag == "svg" and self.section:
            self.out.figures[self.section] += 1
        elif tag == "table" and a.get("data-table"):
            self.table = a["data-table"]
            self.out.tables[self.table] = []
            self.out.rows[self.table] = int(a.get("data-rows") or 0)
        elif tag == "tr" and self.table:
            self.row = []
        elif tag == "td" and self.row is not None:
            self.cell, self.cell_value = [], a.get("data-value")
        elif tag == "p" and "empty" in (a.get("class") or "").split():
            self.empty = (a.get("data-table"), [])
        elif tag == "script":
            self.in_script = True
            self.out.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.section = None
        elif tag == "table":
            self.table = None
        elif tag == "tr" and self.row is not None and self.table:
            if self.row:
                self.out.tables[self.table].append(self.row)
            self.row = None
        elif tag == "td" and self.cell is not None and self.row is not None:
            text = "".join(self.cell)
            self.row.append(self.cell_value if self.cell_value is not None else text)
            self.cell = None
        elif tag == "p" and self.empty is not None:
            name, text = self.empty
            if name:
                self.out.empty[name] = "".join(text)
            elif self.section:
                self.out.section_empty[self.section] = "".join(text)
            self.empty = None
        elif tag == "script":
            self.in_script = False

    def handle_data(self, data: str) -> None:
        if self.in_script:
            self.out.scripts[-1] += data
        if self.section:
            self.out.sections[self.section] += data
        if self.cell is not None:
            self.cell.append(data)
        if self.empty is not None:
            self.empty[1].append(data)


def read_report(path: Path) -> Report:
    p = _Parser()
    p.feed(path.read_text(encoding="utf-8"))
    return p.out
