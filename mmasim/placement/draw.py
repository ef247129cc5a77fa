"""Fragment maps as the ISA figures draw them: a grid of the operand matrix, each cell
labelled with the lane (thread) and the element that holds it, coloured by lane (TMEM: the lane,
column and, for sub-word elements, the half (h), byte (b: block scales) or nibble (n: sparse
metadata) of the column)."""

from __future__ import annotations

import textwrap

import numpy as np


def _label(L, lane, i) -> str:
    if L.storage != "tmem":
        return f"T{lane}:{i}"
    column, bit = L.register(i)     # sub-word TMEM elements: which byte / nibble / half of the column
    if L.bits >= 32:
        return f"L{lane}:c{column}"
    unit = {16: "h", 8: "b", 4: "n"}.get(L.bits)
    return f"L{lane}:c{column}" + (f"{unit}{bit // L.bits}" if unit else f"@{bit}")


def title(L, arch: str = "", instruction: str = "") -> str:
    where = (f"{L.lanes} TMEM lanes x {L.registers} columns" if L.storage == "tmem"
             else f"{L.lanes} lanes x {L.registers} registers, {L.elements} {L.bits}-bit elements per lane")
    blocks = f", {L.blocks} blocks of {L.rows // L.blocks} rows stacked" if L.blocks > 1 else ""
    head = f"{arch}: {instruction}: " if arch else ""
    return f"{head}operand {L.operand.upper()} ({L.rows}x{L.cols}{blocks}; {where})"


def text(L, arch: str = "", instruction: str = "") -> str:
    """The matrix as a text grid: cell (row, col) reads ``T<lane>:<i>`` (TMEM:
    ``L<lane>:c<column>``), under a header line and an ``evidence:`` line saying what the
    layout's formulas were checked against."""
    cells = [[_label(L, *L.owner(r, c)) for c in range(L.cols)] for r in range(L.rows)]
    w = max(len(x) for row in cells for x in row)
    rw = len(str(L.rows - 1))
    lines = [title(L, arch, instruction), f"evidence: {L.evidence}",
             " " * (rw + 3) + " ".join(f"{c:>{w}}" for c in range(L.cols))]
    per = L.rows // L.blocks
    for r, row in enumerate(cells):
        if L.blocks > 1 and r % per == 0:
            lines.append(f"-- block {r // per}")
        lines.append(f"{r:>{rw}} | " + " ".join(f"{x:>{w}}" for x in row))
    return "\n".join(lines)


def entries(L) -> list:
    """Every element as a dict: lane, element, register, bit, row, col (JSON output)."""
    out = []
    rows, cols, valid = L.table()
    for lane in range(L.lanes):
        for i in range(L.elements):
            if valid[lane, i]:
                reg, bit = L.register(i)
                out.append({"lane": lane, "element": i, "register": reg, "bit": bit,
                            "row": int(rows[lane, i]), "col": int(cols[lane, i])})
    return out


def _short(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def figure(L, path, arch: str = "", instruction: str = "") -> None:
    """Write the fragment map to ``path`` (type from its extension; needs matplotlib)."""
    try:
        import matplotlib
    except ImportError as exc:     # pragma: no cover - matplotlib is a test dependency
        raise ImportError("drawing a layout needs matplotlib (pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    owner = np.array([[L.owner(r, c) for c in range(L.cols)] for r in range(L.rows)])
    lanes = owner[..., 0]
    cell = 0.62 if L.rows * L.cols <= 64 * 64 else 0.12
    fig_w = min(max(4.0, L.cols * cell + 1.5), 60.0)
    fig_h = min(max(3.0, L.rows * cell * 0.55 + 1.2), 60.0)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    cmap = plt.get_cmap("tab20", 20) if L.lanes <= 20 else plt.get_cmap("hsv", L.lanes + 1)
    # interleave hues so neighbouring lanes get distant colours
    order = (np.arange(L.lanes) * 7) % L.lanes if L.lanes > 20 and L.lanes % 7 else np.arange(L.lanes)
    ax.imshow(order[lanes], cmap=cmap, vmin=0, vmax=max(L.lanes, 20), aspect=0.55, interpolation="nearest",
              alpha=0.55)
    if L.rows * L.cols <= 64 * 64:
        size = 7 if L.cols <= 16 else 6 if L.cols <= 32 else 4
        for r in range(L.rows):
            for c in range(L.cols):
                ax.text(c, r, _label(L, *owner[r, c]), ha="center", va="center", fontsize=size)
    ax.set_xticks(range(L.cols))
    ax.set_yticks(range(L.rows))
    ax.tick_params(labelsize=6, top=True, labeltop=True, bottom=False, labelbottom=False)
    ax.set_xticks(np.arange(-0.5, L.cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, L.rows, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    per = L.rows // L.blocks
    for b in range(1, L.blocks):
        ax.axhline(b * per - 0.5, color="black", linewidth=1.5)
    ax.set_xlabel("column", fontsize=8)
    ax.set_ylabel("row", fontsize=8)
    cell = ("L<TMEM lane>:c<column>" + ("b<byte>" if L.bits < 32 else "")) if L.storage == "tmem" \
        else "T<lane>:<element>"
    # wrap the header to the figure's width (a narrow operand, e.g. a 16 x 1 scale column, clipped it)
    width = max(30, int(fig_w * 13))
    head = "\n".join(textwrap.fill(x, width) for x in (title(L, arch, instruction), f"evidence: {_short(L.evidence)}",
                                                       f"cell: {cell}"))
    ax.set_title(head, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
