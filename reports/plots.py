"""The report's figures (matplotlib, Agg, no pyplot), each returned as PNG bytes.

Every figure carries a footer that says what was run — device, versions,
seed, sample sizes, α and family budget, machine — so a figure copied out of
the report still says where it came from.

matplotlib is a dependency of specsim; where it is missing anyway (an
environment that stripped it), :func:`available` says so and the writers
leave the figures out with a note instead of failing.

Example::

    fig = pvalue_figure(inputs.conformance)
    if fig: open("p.png", "wb").write(fig.png)
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass

from reports import tables

MAX_DISTRIBUTION_CASES = 6
STATUS_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "error": "#6a1b9a", "not_supported": "#9e9e9e", None: "#ffffff"}


@dataclass
class Figure:
    key: str
    title: str
    caption: str
    png: bytes


def available() -> tuple[bool, str]:
    """``(True, "")`` if matplotlib imports, else ``(False, why)``."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure as _F  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return False, f"matplotlib is not available ({type(e).__name__}: {e}); matplotlib is a dependency of specsim: reinstall it (pip install -e .) for plots"
    return True, ""


def _short(text, width: int = 32) -> str:
    """Input text for a plot: one line, at most ``width`` characters (legends and ticks stay readable)."""
    return tables.first_line(text, width)


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure
    fig = MplFigure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig, footer: str) -> bytes:
    chars = max(int(fig.get_figwidth() * 17), 60)  # monospace 6.5 pt: about 17 characters per inch
    wrapped = "\n".join(textwrap.wrap(footer, chars)[:6])
    lines = wrapped.count("\n") + 1
    fig.text(0.005, 0.005, wrapped, fontsize=6.5, color="#444444", va="bottom", ha="left", family="monospace")
    height_in = fig.get_figheight()
    fig.subplots_adjust(bottom=min((0.75 + 0.12 * lines) / height_in, 0.45))  # room for x labels and the footer
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


# ----------------------------------------------------------------------------- p-values


def pvalue_figure(conformance: list[tuple[str, dict]]) -> Figure | None:
    """All statistical checks' p-values against Uniform(0, 1): a log-scale QQ plot and a histogram."""
    series = []
    for _, doc in conformance:
        ps = sorted(float(c["p_value"]) for c in tables.checks_of(doc) if isinstance(c.get("p_value"), (int, float)))
        if ps:
            series.append((_short(tables.device_label(doc)), ps, doc.get("alpha_family")))
    if not series:
        return None
    fig = _figure(10, 4.6)
    qq, hist = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    top = 1.0
    for label, ps, _ in series:
        m = len(ps)
        expected = [-math.log10((i + 0.5) / m) for i in range(m)]
        observed = [-math.log10(max(p, 1e-300)) for p in ps]
        qq.plot(expected, observed, "o", ms=3, label=f"{label} ({m} checks)")
        top = max(top, max(expected), min(max(observed), 30))
        hist.hist(ps, bins=10, range=(0, 1), histtype="step", linewidth=1.5, label=label)
    qq.plot([0, top], [0, top], color="#888888", lw=1, label="uniform")
    qq.set_xlabel("expected −log10 p (uniform)")
    qq.set_ylabel("observed −log10 p")
    qq.set_title("QQ against uniform")
    qq.legend(fontsize=7)
    m_max = max(len(ps) for _, ps, _ in series)
    hist.axhline(m_max / 10, color="#888888", lw=1, ls="--", label="uniform (largest run)")
    hist.set_xlabel("p-value")
    hist.set_ylabel("checks")
    hist.set_title("histogram")
    hist.legend(fontsize=7)
    fig.suptitle("p-values of all statistical checks vs Uniform(0, 1)")
    alphas = ", ".join(f"{tables.fmt(a)}" for _, _, a in series)
    caption = (f"Under a correct device every p-value is uniform: points near the diagonal, a flat histogram. "
               f"Family false-fail budget α = {alphas}, split over the checks (Bonferroni); a point above "
               f"−log10(α/m) fails.")
    return Figure("pvalues", "p-values against uniform", caption, _png(fig, tables.provenance_line(conformance)))


# ----------------------------------------------------------------------------- distributions


def distribution_cases(conformance: list[tuple[str, dict]], kind: str) -> tuple[list[tuple[str, dict]], int]:
    """Checks carrying observed counts and an exact law of ``kind`` (``tokens`` or ``num_accepted``):
    the chosen few (failing first, then smallest p-value) and how many there were."""
    found = []
    for _, doc in conformance:
        for c in tables.checks_of(doc):
            d = tables.distribution_of(c)
            if d is not None and d["kind"] == kind:
                found.append((_short(tables.device_label(doc), 28), d))
    found.sort(key=lambda x: (x[1]["status"] == "pass", x[1]["p_value"] if x[1]["p_value"] is not None else 1.0))
    return found[:MAX_DISTRIBUTION_CASES], len(found)


def _interval(prob: float, n: float, level: float = 0.99) -> tuple[float, float]:
    """The central ``level`` binomial interval of the frequency of a cell of probability ``prob`` in ``n``."""
    if n <= 0:
        return prob, prob
    try:
        from scipy.stats import binom
        lo, hi = binom.ppf([(1 - level) / 2, (1 + level) / 2], int(n), min(max(prob, 0.0), 1.0))
        return float(lo) / n, float(hi) / n
    except Exception:  # scipy missing: the normal approximation
        half = 2.576 * math.sqrt(max(prob * (1 - prob), 0.0) / n)
        return max(prob - half, 0.0), min(prob + half, 1.0)


def _distribution_figure(cases, total: int, kind: str, conformance) -> Figure | None:
    if not cases:
        return None
    cols = min(len(cases), 3)
    rows = math.ceil(len(cases) / cols)
    fig = _figure(4.2 * cols, 3.6 * rows + 1.0)
    fig.subplots_adjust(hspace=0.75, wspace=0.35)
    for i, (device, d) in enumerate(cases):
        ax = fig.add_subplot(rows, cols, i + 1)
        x = list(range(len(d["labels"])))
        n = d["n"]
        lo_hi = [_interval(e, n) for e in d["expected"]]
        ax.bar(x, d["expected"], color="#90caf9", label="exact law", width=0.8)
        ax.errorbar(x, d["expected"], yerr=[[e - lo for e, (lo, _) in zip(d["expected"], lo_hi)],
                                            [hi - e for e, (_, hi) in zip(d["expected"], lo_hi)]],
                    fmt="none", ecolor="#1565c0", capsize=2, lw=1, label="99% interval")
        freq = [o / n if n else 0.0 for o in d["observed"]]
        ax.plot(x, freq, "o", color=_status_colour(d["status"]), ms=4, label="observed")
        if len(x) <= 16:
            ax.set_xticks(x)
            ax.set_xticklabels([_short(lbl, 12) for lbl in d["labels"]], fontsize=6, rotation=90 if len(x) > 8 else 0)
        where = f" pos {d['position']}" if d.get("position") is not None else ""
        where += " (worst cells only)" if d.get("partial") else ""
        ax.set_title(f"{tables.first_line(d['name'], 48)}{where}\n{device}: {d['status']}, p = "
                     f"{tables.fmt(d['p_value'], 3)} (α = {tables.fmt(d['alpha'], 2)}), n = {tables.fmt(int(n))}\n"
                     f"seed {d['seed'] if d.get('seed') is not None else '?'}", fontsize=6.5)  # 3 lines: a 19-digit seed overruns the panel
        ax.set_xlabel("number accepted" if kind == "num_accepted" else "token (cell)", fontsize=7)
        ax.set_ylabel("frequency", fontsize=7)
        ax.tick_params(labelsize=6)
        if i == 0:
            ax.legend(fontsize=6)
    what = "number-accepted law" if kind == "num_accepted" else "emitted-token frequencies per position"
    fig.suptitle(f"{what} vs exact law ({len(cases)} of {total} checks: failing first, then smallest p)")
    partial = any(d.get("partial") for _, d in cases)
    caption = (("Checks that recorded only their worst cells show those cells. " if partial else "")
               + f"Bars: the exact law; error bars: the central 99% binomial interval of the frequency of each cell "
               f"at the check's n (pointwise, not the check's own threshold); dots: observed frequencies.")
    return Figure(f"dist-{kind}", what + " vs exact law", caption, _png(fig, tables.provenance_line(conformance)))


def _status_colour(status) -> str:
    return {"pass": "#1b5e20", "fail": "#c62828", "error": "#6a1b9a"}.get(status, "#000000")


def token_distribution_figure(conformance) -> Figure | None:
    cases, total = distribution_cases(conformance, "tokens")
    return _distribution_figure(cases, total, "tokens", conformance)


def num_accepted_figure(conformance) -> Figure | None:
    cases, total = distribution_cases(conformance, "num_accepted")
    return _distribution_figure(cases, total, "num_accepted", conformance)


# ----------------------------------------------------------------------------- simulations


def temperature_figure(simulations: list[tuple[str, dict]], conformance) -> Figure | None:
    """AL against temperature, with and without draft probs (seed 003's table, drawn)."""
    lines: dict[bool | None, list[tuple[float, float]]] = {}
    for _, sim in simulations:
        for t, flag, al in tables.sweep_points(sim):
            lines.setdefault(flag, []).append((t, al))
    if not any(len(v) >= 1 for v in lines.values()):
        return None
    fig = _figure(6.5, 4.4)
    ax = fig.add_subplot(1, 1, 1)
    names = {False: "w/o draft probs (point proposals)", True: "w/ draft probs", None: "unspecified"}
    for flag, pts in lines.items():
        pts.sort()
        ax.plot([t for t, _ in pts], [a for _, a in pts], "o-", label=names[flag])
    ax.set_xlabel("temperature")
    ax.set_ylabel("mean acceptance length (tokens / step)")
    ax.set_title("AL vs temperature")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    sims = [s for _, s in simulations]
    extra = "; ".join(sorted({f"{k}={s[k]}" for s in sims for k in ("seed", "num_drafts", "k", "num_speculative_tokens")
                              if isinstance(s.get(k), (int, float))}))[:300]
    return Figure("temperature", "AL vs temperature", "Mean acceptance length per verification step.",
                  _png(fig, tables.provenance_line(conformance, f"simulation: {extra or 'see report.json'}")))


def acceptance_figure(simulations, conformance) -> Figure | None:
    """Acceptance rate per draft position, one line per simulation run."""
    runs = []
    for src, sim in simulations:
        counts, n = sim.get("acc_counts"), tables.num_drafts(sim)
        if isinstance(counts, list) and counts and n:
            runs.append((_short(tables.sim_label(src, sim), 40), [float(c) / n for c in counts], int(n)))
    if not runs:
        return None
    fig = _figure(6.5, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    for label, rates, n in runs[:12]:
        ax.plot(range(1, len(rates) + 1), rates, "o-", label=f"{label} (num_drafts {n})")
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate")
    ax.set_ylim(0, 1.02)
    ax.set_title("acceptance per position")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return Figure("acceptance", "acceptance per position", "acc_counts[i] / num_drafts per draft position.",
                  _png(fig, tables.provenance_line(conformance, "simulation")))


# ----------------------------------------------------------------------------- matrix


def matrix_figure(conformance) -> Figure | None:
    """Device × check-group conformance matrix, coloured by the worst status in each cell."""
    if not conformance:
        return None
    devices, groups, cells = tables.matrix(conformance)
    if not groups or len(devices) < 2:  # one device: a single column says nothing the layer table does not
        return None
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    order = ["not_supported", "pass", "fail", "error"]
    # rows: check groups, columns: devices (the list of groups is the long axis)
    values = [[(order.index(cells[d][g]) + 1) if cells[d][g] in order else 0 for d in range(len(devices))]
              for g in range(len(groups))]
    fig = _figure(max(6.5, 1.3 * len(devices) + 4.5), 1.8 + 0.24 * len(groups))
    ax = fig.add_subplot(1, 1, 1)
    cmap = ListedColormap([STATUS_COLOURS[None]] + [STATUS_COLOURS[s] for s in order])
    ax.imshow(values, cmap=cmap, vmin=0, vmax=len(order), aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(devices)))
    ax.set_xticklabels([_short(d, 24) for d in devices], fontsize=8, rotation=20, ha="right")
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels([_short(g, 36) for g in groups], fontsize=7)
    ax.legend(handles=[Patch(color=STATUS_COLOURS[s], label=s) for s in order] + [Patch(facecolor="white",
              edgecolor="#999999", label="not run")], fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    ax.set_title("device × check conformance\n(worst status per check group)", fontsize=9)
    fig.subplots_adjust(left=0.3, right=0.72, top=1 - 0.7 / (1.8 + 0.24 * len(groups)))
    return Figure("matrix", "device × check matrix", "Each cell: the worst status of the group's checks "
                  "(error > fail > pass > not_supported).", _png(fig, tables.provenance_line(conformance)))


def all_figures(inputs) -> list[Figure]:
    """Every figure the inputs allow, in report order.

    Mathtext is off: text from inputs (a device named ``a$b``) must print as is, not parse as TeX.
    """
    import matplotlib
    conf, sims = inputs.conformance, inputs.simulations
    with matplotlib.rc_context({"text.parse_math": False}):
        out = [matrix_figure(conf), pvalue_figure(conf), token_distribution_figure(conf), num_accepted_figure(conf),
               acceptance_figure(sims, conf), temperature_figure(sims, conf)]
    return [f for f in out if f is not None]
