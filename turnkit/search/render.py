"""Pictures of search trees for people: a PNG (matplotlib) and a self-contained HTML page (inline SVG).

Both show the same layout: depth goes down, siblings spread left to right (leaves in depth-first order,
parents centred over their children). A node's size grows with its visit count ``N``, its colour is its
``Q`` (red low, green high), squares are terminal states (green outline: success, red: failure), and the
committed path is drawn thick and blue. In step-level search, mid-turn (partial) nodes have a dashed
outline and each edge is one reasoning step. The HTML page adds hover tooltips with each turn's full text, the
env's reply and the node statistics, and lists the committed conversation below the tree.

Example:
    >>> import tempfile, os
    >>> from turnkit.types import AgentTurn
    >>> from turnkit.search.tree import SearchTree
    >>> tree = SearchTree(env_id="demo", seed=0, observation="2+2?")
    >>> a = tree.add_child(0, AgentTurn("ANSWER: 4"), observation="Correct.", terminal=True, info={"success": True})
    >>> tree.commit(a)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     html = render_html(tree, os.path.join(d, "t.html"))
    ...     "ANSWER: 4" in html.read_text()
    True
"""

from __future__ import annotations

import html
from pathlib import Path

from turnkit.search.tree import SearchTree

_MAX_LABELLED = 60


def layout(tree: SearchTree) -> dict[int, tuple[float, float]]:
    """Node positions ``(x, depth)``: leaves at consecutive x in depth-first order, parents centred.

    Example:
        >>> from turnkit.types import AgentTurn
        >>> from turnkit.search.tree import SearchTree
        >>> t = SearchTree(env_id="d", seed=0, observation="q")
        >>> a, b = (t.add_child(0, AgentTurn(s), observation="o") for s in "ab")
        >>> layout(t)
        {1: (0.0, 1.0), 2: (1.0, 1.0), 0: (0.5, 0.0)}
    """
    pos: dict[int, tuple[float, float]] = {}
    next_x = 0.0

    def place(n: int) -> float:
        nonlocal next_x
        kids = tree.children(n)
        if not kids:
            x = next_x
            next_x += 1.0
        else:
            xs = [place(c) for c in kids]
            x = (xs[0] + xs[-1]) / 2
        pos[n] = (x, float(tree.depth(n)))
        return x

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        place(0)
    finally:
        sys.setrecursionlimit(limit)
    return pos


def _title(tree: SearchTree) -> str:
    g = tree.graph.graph
    path = tree.committed_path()
    outcome = tree.node(path[-1])["success"]
    result = {True: "success", False: "failure", None: "unfinished"}[outcome if tree.is_terminal(path[-1]) else None]
    return (
        f"{g.get('search', 'search')} tree  {tree.env_id}  seed={tree.seed}  task={g.get('task_id')}\n"
        f"{len(tree)} nodes, committed {len(path) - 1} turns: {result}"
    )


def _short(text: str, n: int = 22) -> str:
    text = "".join(c if c.isprintable() else "·" for c in " ".join(text.split()))
    return text if len(text) <= n else text[: n - 1] + "…"


def render_png(tree: SearchTree, path: str | Path, *, dpi: int = 110) -> Path:
    """Draw the tree to a PNG file (see the module docstring for the encoding); returns the path.

    Example:
        >>> import tempfile, os
        >>> from turnkit.types import AgentTurn
        >>> from turnkit.search.tree import SearchTree
        >>> tree = SearchTree(env_id="demo", seed=0, observation="q")
        >>> _ = tree.add_child(0, AgentTurn("a"), observation="o")
        >>> with tempfile.TemporaryDirectory() as d:
        ...     render_png(tree, os.path.join(d, "t.png")).stat().st_size > 1000
        True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colors
    from matplotlib.lines import Line2D

    pos = layout(tree)
    width = max(pos[n][0] for n in pos) + 1
    depth = max(pos[n][1] for n in pos) + 1
    fig_w = min(max(6.0, 0.55 * width + 3.0), 40.0)
    fig_h = min(max(4.0, 1.5 * depth + 1.8), 30.0)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    committed = set(tree.committed_path())
    qs = [tree.node(n)["q"] for n in tree.graph.nodes if n != 0] or [0.0]
    bound = max(1e-6, max(abs(min(qs)), abs(max(qs))))
    norm = colors.TwoSlopeNorm(vmin=-bound, vcenter=0.0, vmax=bound)
    cmap = plt.get_cmap("RdYlGn")
    for u, v in tree.graph.edges:
        on_path = u in committed and v in committed
        ax.plot(
            [pos[u][0], pos[v][0]],
            [pos[u][1], pos[v][1]],
            color="#1f4e9c" if on_path else "#b0b0b0",
            lw=3.0 if on_path else 0.9,
            zorder=1,
        )
    max_n = max([tree.node(n)["visits"] for n in tree.graph.nodes] + [1])
    labelled = len(tree) <= _MAX_LABELLED
    for n in tree.graph.nodes:
        attrs = tree.node(n)
        x, y = pos[n]
        size = 60 + 540 * (attrs["visits"] / max_n) ** 0.5
        face = "#dddddd" if n == 0 else cmap(norm(attrs["q"]))
        edge = "black"
        if attrs["terminal"]:
            edge = "#1a9641" if attrs["success"] else "#d7191c"
        ax.scatter(
            [x],
            [y],
            s=size,
            c=[face],
            marker="s" if attrs["terminal"] else "o",
            edgecolors=edge,
            linewidths=2,
            linestyles="--" if tree.is_partial(n) else "-",
        )
        if labelled or n in committed:
            text = f"N={attrs['visits']}" if n == 0 else f"N={attrs['visits']}\nQ={attrs['q']:+.2f}"
            ax.annotate(text, (x, y), xytext=(8, -4), textcoords="offset points", fontsize=7, va="top", zorder=4)
        if n in committed and n != 0:
            px, py = pos[tree.parent(n)]
            ax.annotate(
                _short(tree.edge(n)["text"]),
                ((x + px) / 2, (y + py) / 2),
                fontsize=7,
                color="#1f4e9c",
                ha="center",
                va="center",
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#1f4e9c", "lw": 0.6},
                zorder=5,
            )
    ax.invert_yaxis()
    ax.set_ylabel("depth (turns, or steps)")
    ax.set_yticks(range(int(depth)))
    ax.set_xticks([])
    ax.set_xlim(-0.8, width + 0.6)
    ax.set_ylim(depth - 0.4, -0.6)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(_title(tree), fontsize=9, loc="left")
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, fraction=0.03, pad=0.01, label="Q")
    legend = [
        Line2D([0], [0], color="#1f4e9c", lw=3, label="committed path"),
        Line2D([0], [0], marker="s", color="w", markeredgecolor="#1a9641", markersize=8, mew=2, label="success"),
        Line2D([0], [0], marker="s", color="w", markeredgecolor="#d7191c", markersize=8, mew=2, label="failure"),
        Line2D([0], [0], marker="o", color="w", markeredgecolor="black", markersize=8, label="size ~ sqrt(N)"),
    ]
    ax.legend(handles=legend, loc="lower left", fontsize=7, frameon=False, ncols=4, bbox_to_anchor=(0, -0.12))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _rgb(q: float, bound: float) -> str:
    t = max(-1.0, min(1.0, q / bound)) if bound > 0 else 0.0
    if t < 0:
        r, g, b = 215, int(25 + (255 - 25) * (1 + t)), int(28 + (191 - 28) * (1 + t))
    else:
        r, g, b = int(255 - (255 - 26) * t), int(255 - (255 - 150) * t), int(191 - (191 - 65) * t)
    return f"rgb({r},{g},{b})"


def render_html(tree: SearchTree, path: str | Path) -> Path:
    """Write a self-contained HTML page (inline SVG, no scripts or external files); returns the path."""
    pos = layout(tree)
    sx, sy, margin = 46.0, 90.0, 40.0
    width = (max(p[0] for p in pos.values()) + 1) * sx + 2 * margin
    height = (max(p[1] for p in pos.values()) + 1) * sy + margin
    committed = tree.committed_path()
    on_path = set(committed)
    qs = [abs(tree.node(n)["q"]) for n in tree.graph.nodes if n != 0] or [1.0]
    bound = max(qs) or 1.0
    max_n = max([tree.node(n)["visits"] for n in tree.graph.nodes] + [1])

    def xy(n: int) -> tuple[float, float]:
        return margin + pos[n][0] * sx, margin + pos[n][1] * sy

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}">']
    for u, v in tree.graph.edges:
        (x1, y1), (x2, y2) = xy(u), xy(v)
        bold = u in on_path and v in on_path
        style = 'stroke="#1f4e9c" stroke-width="4"' if bold else 'stroke="#bbb" stroke-width="1"'
        parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" {style}/>')
    for n in sorted(tree.graph.nodes):
        attrs = tree.node(n)
        x, y = xy(n)
        r = 5 + 13 * (attrs["visits"] / max_n) ** 0.5
        fill = "#ddd" if n == 0 else _rgb(attrs["q"], bound)
        stroke = "#000"
        if attrs["terminal"]:
            stroke = "#1a9641" if attrs["success"] else "#d7191c"
        action = tree.edge(n)["text"] if n else "(reset)"
        partial = tree.is_partial(n)
        tip = (
            f"node {n}  depth {attrs['depth']}  N={attrs['visits']}  Q={attrs['q']:+.3f}  V={attrs['value']:+.3f}  "
            f"r={attrs['reward']:+.3f}  prior={tree.edge(n)['prior'] if n else 1.0:.3g}\n"
            f"--- {'step' if partial or (n and tree.is_partial(tree.parent(n))) else 'turn'} ---\n{action}\n"
            f"--- env ---\n{'(mid-turn: the env has not seen this turn yet)' if partial else attrs['observation']}"
        )
        dash = ' stroke-dasharray="3,2"' if partial else ""
        shape = (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}"'
            if attrs["terminal"]
            else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}"'
        )
        parts.append(
            f'<g>{shape} fill="{fill}" stroke="{stroke}" stroke-width="2"{dash}><title>{html.escape(tip)}</title>'
            f"{'</rect>' if attrs['terminal'] else '</circle>'}"
            f'<text x="{x + r + 2:.1f}" y="{y + 4:.1f}" font-size="9">{attrs["visits"]}</text></g>'
        )
    parts.append("</svg>")
    convo = []
    for m in tree.messages(committed[-1]):
        convo.append(f'<div class="{m.role}"><b>{m.role}</b><pre>{html.escape(m.content)}</pre></div>')
    title = html.escape(_title(tree)).replace("\n", "<br>")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(tree.env_id)} seed {tree.seed}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; }} .tree {{ overflow: auto; border: 1px solid #ddd; }}
pre {{ white-space: pre-wrap; margin: 0.2em 0 0.8em 1em; }} .assistant b {{ color: #1f4e9c; }}
</style></head><body>
<h3>{title}</h3>
<p>Node size: visits N (number shown). Colour: Q (red low, green high). Squares: terminal (green outline
success, red failure). Thick blue: committed path. Hover a node for its turn, the env's reply and statistics.</p>
<div class="tree">{"".join(parts)}</div>
<h3>Committed conversation</h3>
{"".join(convo)}
</body></html>
"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
