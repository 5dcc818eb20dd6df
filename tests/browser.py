"""Real headless Chromium for dashboard tests: the DOM after the page's scripts ran, screenshots,
and a phone-width frame (headless Chromium will not make a window narrower than 500 px)."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

CHROMIUM = shutil.which("chromium")
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--allow-file-access-from-files",  # the phone frame reads its page's layout
    "--virtual-time-budget=15000",
]

# A page holding the dashboard in a frame of a phone's width; it copies what the dashboard laid
# out (its width, each chart's width, what each chart plotted) into its own body for --dump-dom.
PHONE_PAGE = """<!doctype html><html><body style="margin:0">
<iframe id="f" src="{src}" style="width:{width}px;height:{height}px;border:0"></iframe>
<script>
document.getElementById('f').addEventListener('load', function () {{
  var d = this.contentDocument;
  document.body.dataset.phone = JSON.stringify({{
    scroll: d.documentElement.scrollWidth, inner: this.contentWindow.innerWidth,
    answers: Array.from(d.querySelectorAll('#answers li')).map(function (li) {{
      var r = li.getBoundingClientRect();
      return {{text: li.textContent, right: r.right, top: r.top}};
    }}),
    charts: Array.from(d.querySelectorAll('.js-plotly-plot')).map(function (gd) {{
      var svg = gd.querySelector('.main-svg');
      return {{id: gd.id, width: +svg.getAttribute('width'), traces: gd.dataset.traces}};
    }})
  }});
}});
</script></body></html>"""


def dump_dom(url: str, profile: Path, width: int = 1280) -> str:
    proc = subprocess.run(
        [
            CHROMIUM,
            *CHROME_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},2000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    return proc.stdout


def screenshot(url: str, out: Path, profile: Path, width: int, height: int) -> tuple[int, int]:
    """A PNG of the page at width x height; returns its size as read from the PNG header."""
    subprocess.run(
        [
            CHROMIUM,
            *CHROME_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            url,
        ],
        capture_output=True,
        timeout=180,
        check=True,
    )
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def phone_page(dashboard: Path, where: Path, width: int = 390, height: int = 2400) -> Path:
    page = where / f"phone-{width}.html"
    page.write_text(PHONE_PAGE.format(src=dashboard.as_uri(), width=width, height=height))
    return page


def tag(dom: str, element_id: str) -> str | None:
    """The opening tag of the element with this id."""
    m = re.search(rf'<[a-z]+\b[^>]*\bid="{re.escape(element_id)}"[^>]*>', dom)
    return m.group(0) if m else None


def attr(dom: str, element_id: str, name: str) -> str | None:
    opening = tag(dom, element_id) or ""
    m = re.search(rf'\b{re.escape(name)}="([^"]*)"', opening)
    return html.unescape(m.group(1)) if m else None


def body_data(dom: str, name: str) -> str:
    m = re.search(rf'<body\b[^>]*\bdata-{name}="([^"]*)"', dom)
    assert m, f"no data-{name} on the body"
    return html.unescape(m.group(1))


def traces(dom: str, element_id: str) -> list[dict]:
    """What the chart plotted, as the page's script recorded it from plotly's own data."""
    return json.loads(attr(dom, element_id, "data-traces") or "[]")


def chart_ids(dom: str) -> list[str]:
    return re.findall(r'<div\b[^>]*\bid="(chart-[a-z]+)"', dom)


def grid_rows(dom: str, grid_id: str) -> tuple[list[str], list[list[str]], list[list[str]]]:
    """(headers, cell texts, hrefs per row) of a table the page's script rendered into a grid."""
    start = dom.index(f'id="{grid_id}"')
    table = dom[start : dom.index("</table>", start)]
    headers = [html.unescape(re.sub("<[^>]+>", "", h)) for h in re.findall(r"<th\b[^>]*>(.*?)</th>", table)]
    body = table.split("<tbody>", 1)[1]
    rows, links = [], []
    for row in re.findall(r"<tr\b[^>]*>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td\b[^>]*>(.*?)</td>", row, re.S)
        rows.append([html.unescape(re.sub("<[^>]+>", "", c)) for c in cells])
        links.append([html.unescape(h) for h in re.findall(r'href="([^"]*)"', row)])
    return headers, rows, links
