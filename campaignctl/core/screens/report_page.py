"""The report page: one self-contained HTML file. Charts are PNG data URIs; the style and the one
script are inline and pinned by hash in a Content-Security-Policy that allows nothing else, so
the page loads nothing from anywhere. Pure; every string is escaped (task params and decision
reasons come from users and their programs).

The script runs on load: it counts the charts whose image the browser decoded and writes
`data-charts` / `data-charts-rendered` on <body> (what the headless-browser test reads).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

SCRIPT = """
window.addEventListener("load", function () {
  var charts = document.querySelectorAll("figure.chart");
  var rendered = 0;
  for (var i = 0; i < charts.length; i++) {
    var img = charts[i].querySelector("img");
    if (img && img.complete && img.naturalWidth > 0) {
      rendered++;
      charts[i].setAttribute("data-rendered", "true");
    }
  }
  document.body.setAttribute("data-charts", String(charts.length));
  document.body.setAttribute("data-charts-rendered", String(rendered));
});
"""

STYLE = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 1.5rem auto; max-width: 75rem; color: #222; }
h1 { margin-bottom: 0.2rem; } .subtitle { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure.chart { margin: 1.5rem 0; border-top: 1px solid #ddd; padding-top: 0.5rem; }
figure.chart img { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.9rem; }
.no-data { color: #a15c00; font-weight: bold; }
.scroll { overflow-x: auto; max-width: 100%; }
"""


@dataclass(frozen=True, slots=True)
class Chart:
    id: str  # the element's id, stable (tests and links use it): chart-gantt …
    title: str
    caption: str  # what the chart shows
    file: str  # the same PNG, next to the page
    png: bytes
    note: str = ""  # why there is nothing to draw; "" when there is


@dataclass(frozen=True, slots=True)
class Table:
    id: str
    title: str
    headers: tuple[str, ...]
    rows: Sequence[Sequence[str]]
    omitted: int = 0  # rows left out of the page


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    subtitle: str
    summary: Sequence[tuple[str, str]]
    charts: Sequence[Chart]
    tables: Sequence[Table] = ()
    lead: Sequence[Table] = ()  # right under the summary, before the charts: the results, winner first


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def content_policy() -> str:
    return (f"default-src 'none'; img-src data:; style-src '{_sha256(STYLE)}'; "
            f"script-src '{_sha256(SCRIPT)}'; base-uri 'none'; form-action 'none'")


def render_page(page: Page) -> str:
    title = escape(page.title)
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{content_policy()}">',
        f"<title>{title}</title>", f"<style>{STYLE}</style>", f"<script>{SCRIPT}</script>", "</head>",
        "<body>", f"<h1>{title}</h1>", f'<p class="subtitle">{escape(page.subtitle)}</p>',
        _table(Table("summary", "Summary", ("", ""), [list(row) for row in page.summary]), header=False),
        *(_table(table) for table in page.lead),
        *(_figure(chart) for chart in page.charts),
        *(_table(table) for table in page.tables),
        "</body>", "</html>", ""]
    return "\n".join(parts)


def _figure(chart: Chart) -> str:
    """A chart, or for one with nothing to draw its note alone: an empty panel under the same
    words said nothing more (the PNG is still written beside the page)."""
    head = (f'<figure id="{escape(chart.id)}" class="chart" data-file="{escape(chart.file)}">'
            f"<h2>{escape(chart.title)}</h2>")
    if chart.note:
        return f'{head}<p class="no-data">{escape(chart.note)}</p></figure>'
    data = base64.b64encode(chart.png).decode()
    return (f'{head}<img src="data:image/png;base64,{data}" alt="{escape(chart.title)}">'
            f'<figcaption>{escape(chart.caption)} (<a href="{escape(chart.file)}">{escape(chart.file)}</a>)'
            "</figcaption></figure>")


def _table(table: Table, header: bool = True) -> str:
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in table.headers) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>"
                   for row in table.rows)
    more = f"<p>{table.omitted} more row(s) not shown.</p>" if table.omitted else ""
    title = f"<h2>{escape(table.title)}</h2>" if header else ""
    # a table wider than a phone's screen scrolls inside its own box, not the whole page
    return (f'<section id="{escape(table.id)}">{title}<div class="scroll"><table>{head}{body}</table></div>'
            f"{more}</section>")
