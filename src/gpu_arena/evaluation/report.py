"""Render an evaluation run: a Markdown table and a chart with 95% CI whiskers (PNG and HTML)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _cell(text: str, escape_html: bool = True) -> str:
    """A name as a Markdown table cell shows it: ``|`` escaped (it would split the cell) and, for a
    file a renderer reads (``escape_html``), HTML escaped (it would take the name as markup). A
    terminal shows the name as typed otherwise (``?a=1&b=2``, not ``&amp;``)."""
    text = str(text)
    return (html.escape(text) if escape_html else text).replace("|", "\\|")


def markdown_table(rows: Sequence[dict[str, Any]], *, escape_html: bool = True) -> str:
    """The results as a Markdown table; ``escape_html=False`` for a terminal (names as typed)."""
    head = ("| task | split | policy | n | mean return | 95% CI | welfare/opt | surplus | deal rate | breach rate "
            "| invalid rate |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['task']} | {r['split']} | {_cell(r['policy'], escape_html)} | {r['n']} | {r['mean']:+.4f} | "
            f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | {r['welfare_ratio']:.3f} | {r['surplus_over_batna']:+.2f} | "
            f"{r['deal_rate']:.2f} | {r['breach_rate']:.2f} | {r['invalid_rate']:.3f} |")
    return "\n".join(lines)


def paired_table(rows: Sequence[dict[str, Any]], *, escape_html: bool = True) -> str:
    """Paired differences (see :func:`gpu_arena.evaluation.stats.paired_differences`);
    ``escape_html=False`` for a terminal (names as typed)."""
    lines = ["| task | split | policy − versus | n | mean difference | 95% CI | wins / losses | verdict |",
             "|" + "---|" * 8]
    for r in rows:
        verdict = "better" if r["ci_low"] > 0 else "worse" if r["ci_high"] < 0 else "no clear difference"
        lines.append(
            f"| {r['task']} | {r['split']} | {_cell(r['policy'], escape_html)} − {_cell(r['versus'], escape_html)} | "
            f"{r['n']} | {r['mean_diff']:+.4f} | [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | "
            f"{r['wins']} / {r['losses']} | {verdict} |")
    return "\n".join(lines)


def _by_task(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["task"], []).append(r)
    return out


def write_png(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = _by_task(rows)
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4.2), squeeze=False)
    for ax, (task, rs) in zip(axes[0], tasks.items(), strict=True):
        names = [r["policy"] for r in rs]
        means = [r["mean"] for r in rs]
        err = [[r["mean"] - r["ci_low"] for r in rs], [r["ci_high"] - r["mean"] for r in rs]]
        ax.bar(names, means, yerr=err, capsize=4, color="#4C78A8")
        ax.axhline(0.0, color="#444", linewidth=0.8)
        ax.set_title(f"{task} ({rs[0]['split']}, n={rs[0]['n']})")
        ax.set_ylabel("mean episode return (95% CI)")
        ax.tick_params(axis="x", rotation=35)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p


def write_html(rows: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Interactive chart (plotly, with its JavaScript inlined: it works offline)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    tasks = _by_task(rows)
    fig = make_subplots(rows=1, cols=len(tasks), subplot_titles=list(tasks))
    for i, (_task, rs) in enumerate(tasks.items(), start=1):
        fig.add_trace(go.Bar(
            x=[html.escape(r["policy"]) for r in rs], y=[r["mean"] for r in rs], showlegend=False,
            error_y={"type": "data", "symmetric": False, "array": [r["ci_high"] - r["mean"] for r in rs],
                     "arrayminus": [r["mean"] - r["ci_low"] for r in rs]},
            customdata=[[r["n"], r["welfare_ratio"], r["deal_rate"], r["invalid_rate"]] for r in rs],
            hovertemplate="%{x}<br>mean %{y:.4f}<br>n %{customdata[0]}<br>welfare/opt %{customdata[1]:.3f}"
                          "<br>deal rate %{customdata[2]:.2f}<br>invalid %{customdata[3]:.3f}<extra></extra>"),
            row=1, col=i)
    fig.update_layout(title=title, height=450, template="plotly_white")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(p, include_plotlyjs=True, full_html=True)
    return p
