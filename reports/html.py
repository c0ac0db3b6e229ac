"""``report.html``: one self-contained file — inline CSS, figures as base64 PNG, no script, no network.

All text from inputs goes through :func:`esc` (``html.escape`` with quotes),
and a Content-Security-Policy meta tag forbids scripts and every non-``data:``
resource, so a ``<script>`` smuggled into a check's detail can neither run nor
fetch anything even if an escaping bug let it through.

Example::

    >>> esc('<script>alert("x")</script>')
    '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
"""

from __future__ import annotations

import base64
import html

from reports.tables import Table

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #212121; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.pass { background: #e8f5e9; color: #1b5e20; } td.fail { background: #ffebee; color: #b71c1c; font-weight: 600; }
td.error { background: #f3e5f5; color: #4a148c; font-weight: 600; } td.not_supported { color: #757575; }
td.waived { background: #fff8e1; color: #8d6e00; font-weight: 600; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; } .note { color: #555; font-size: 13px; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; } .headline { font-size: 1.1em; }
ul.notes li { color: #6d4c41; }
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def html_table(table: Table, heading: str = "h3") -> str:
    out = [f"<{heading}>{esc(table.title)}</{heading}>", "<table>",
           "<tr>" + "".join(f"<th>{esc(h)}</th>" for h in table.header) + "</tr>"]
    for i, row in enumerate(table.rows):
        classes = table.classes[i] if i < len(table.classes) else []
        cells = []
        for j, cell in enumerate(row):
            cls = classes[j] if j < len(classes) and classes[j] else ""
            cells.append(f'<td class="{esc(cls)}">{esc(cell)}</td>' if cls else f"<td>{esc(cell)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    if table.note:
        out.append(f'<p class="note">{esc(table.note)}</p>')
    return "\n".join(out)


def html_figure(fig) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    return (f'<figure id="fig-{esc(fig.key)}"><img alt="{esc(fig.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption><b>{esc(fig.title)}.</b> {esc(fig.caption)}</figcaption></figure>")


def render(report: dict) -> str:
    """``report``: what :func:`reports.render.build` returns."""
    body = [f"<h1>specsim report</h1>", f'<p class="headline">{esc(report["headline"])}</p>']
    body += [html_table(t, "h2") for t in report.get("banner") or []]  # the verdict and its scope come first
    if report["provenance"]:
        body.append(html_table(report["provenance"], "h2"))
    if report["figures"]:
        body.append("<h2>Figures</h2>")
        body += [html_figure(f) for f in report["figures"]]
    for section, items in report["sections"]:
        body.append(f"<h2>{esc(section)}</h2>")
        for item in items:
            if isinstance(item, Table):
                body.append(html_table(item))
            elif isinstance(item, tuple) and item[0] == "code":
                body.append(f"<pre>{esc(item[1])}</pre>")
            elif isinstance(item, tuple) and item[0] == "details":
                _, summary, table = item
                body.append(f"<details><summary>{esc(summary)}</summary>{html_table(table, 'h4')}</details>")
            else:
                body.append(f"<p>{esc(item)}</p>")
    if report["notes"]:
        body.append("<h2>Notes</h2><ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in report["notes"])
                    + "</ul>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(report['title'])}</title>\n<style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
