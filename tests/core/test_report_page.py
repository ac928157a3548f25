"""The report page: self-contained (no URL outside the page), every string escaped, a CSP that pins
the one style and the one script by hash."""

from __future__ import annotations

import base64
import hashlib
import re

from campaignctl.core.screens.report_page import SCRIPT, STYLE, Chart, Page, Table, content_policy, render_page

PNG = b"\x89PNG\r\n\x1a\n fake"
HOSTILE = '<script>alert("x")</script> & \'q\''


def page(**changes: object) -> str:
    fields: dict[str, object] = dict(
        title=f"Campaign {HOSTILE}", subtitle="now",
        summary=[("campaign", HOSTILE)],
        charts=[Chart("chart-gantt", "Tasks", "caption <b>", "gantt.png", PNG),
                Chart("chart-spend", "Spend", "caption", "spend.png", PNG, note=f"no data {HOSTILE}")],
        tables=[Table("decisions", "Decisions", ("reason",), [[HOSTILE]], omitted=3)])
    fields.update(changes)
    return render_page(Page(**fields))  # type: ignore[arg-type]


def test_every_string_from_the_store_is_escaped() -> None:
    html = page()
    assert "<script>alert" not in html and "<b>" not in html
    escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;q&#x27;"
    assert html.count(escaped) == 5  # title, h1, summary, note, table
    assert html.count("<script>") == 1  # only the page's own


def test_charts_are_inline_images_under_stable_ids_and_an_empty_one_is_its_note() -> None:
    html = page()
    figures = re.findall(r'<figure id="([^"]+)" class="chart" data-file="([^"]+)">', html)
    assert figures == [("chart-gantt", "gantt.png"), ("chart-spend", "spend.png")]
    assert html.count(f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"') == 1  # not the empty one
    assert html.count('class="no-data"') == 1
    assert "3 more row(s) not shown" in html


def test_nothing_is_loaded_from_anywhere() -> None:
    html = page()
    assert "http://" not in html and "https://" not in html and "//" not in re.sub(r"data:[^\"]+", "", html)
    srcs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert all(s.startswith("data:image/png;base64,") or s in ("gantt.png", "spend.png") for s in srcs), srcs


def test_the_policy_pins_the_inline_style_and_script_by_hash() -> None:
    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    policy = content_policy()
    assert policy.startswith("default-src 'none'; img-src data:;")
    assert f"'{digest(STYLE)}'" in policy and f"'{digest(SCRIPT)}'" in policy
    html = page()
    assert f"<style>{STYLE}</style>" in html and f"<script>{SCRIPT}</script>" in html
    assert f'content="{policy}"' in html


def test_a_page_without_tables_or_charts_still_renders() -> None:
    html = page(charts=[], tables=[])
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<figure" not in html
