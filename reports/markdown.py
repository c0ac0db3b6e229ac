"""``report.md``: the report as GitHub-flavoured Markdown tables that paste into a pull request.

Cells are escaped so input text can neither break a table (``|``, newlines)
nor inject HTML (``<``, ``>``, ``&``), which GitHub would otherwise render.

Example::

    >>> md_cell("a|b <script>")
    'a\\\\|b &lt;script&gt;'
"""

from __future__ import annotations

from reports.tables import Table


def md_cell(text) -> str:
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", " ").replace("`", "'")


def md_table(table: Table, heading: str = "###") -> str:
    out = [f"{heading} {md_cell(table.title)}", ""]
    out.append("| " + " | ".join(md_cell(h) for h in table.header) + " |")
    out.append("|" + "|".join("---" for _ in table.header) + "|")
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in table.rows]
    if table.note:
        out += ["", md_cell(table.note)]
    return "\n".join(out)


def md_code(text: str) -> str:
    body = str(text).replace("```", "'''")
    return f"```\n{body}\n```"


GITHUB_COMMENT_LIMIT = 65_536
"""GitHub refuses a PR comment or description longer than this; past it the folded tables are dropped."""


def render(report: dict) -> str:
    """``report``: what :func:`reports.render.build` returns. Stays under GitHub's comment limit when
    it can, by leaving out the folded per-check tables (report.html has them)."""
    text = _render(report, folded=True)
    if len(text) < GITHUB_COMMENT_LIMIT - 1000:
        return text
    return _render(report, folded=False)


def _render(report: dict, folded: bool) -> str:
    out = ["# specsim report", "", md_cell(report["headline"]), ""]
    for table in report.get("banner") or []:  # the verdict and its scope come first (SPEC §10)
        out += [md_table(table, "##"), ""]
    if report["provenance"]:
        out += [md_table(report["provenance"], "##"), ""]
    for section, items in report["sections"]:
        out += [f"## {md_cell(section)}", ""]
        for item in items:
            if isinstance(item, Table):
                out += [md_table(item), ""]
            elif isinstance(item, tuple) and item[0] == "code":
                out += [md_code(item[1]), ""]
            elif isinstance(item, tuple) and item[0] == "details":
                _, summary, table = item
                if not folded:
                    out += [f"{md_cell(summary)}: left out to fit a pull-request comment; see report.html.", ""]
                    continue
                out += [f"<details><summary>{md_cell(summary)}</summary>", "", md_table(table, "####"), "",
                        "</details>", ""]
            else:
                out += [md_cell(item), ""]
    if report["figures"]:
        out += ["## Figures", "", "In `report.html`: " + "; ".join(md_cell(f.title) for f in report["figures"]) + ".", ""]
    if report["notes"]:
        out += ["## Notes", ""] + [f"- {md_cell(n)}" for n in report["notes"]] + [""]
    return "\n".join(out).rstrip() + "\n"
