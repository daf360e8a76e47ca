"""Small SVG pictures written by hand (no plotting dependency): a bar histogram and a confusion
matrix heat map. Output is a pure function of the numbers: fixed sizes, integer coordinates,
no ids or timestamps.
"""

from __future__ import annotations

from html import escape

FONT_SIZE = 12
FONT = f'font-family="sans-serif" font-size="{FONT_SIZE}"'
TITLE_Y = 18          # the title's baseline; its glyphs reach FONT_SIZE above it


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{width // 2}" y="{TITLE_Y}" text-anchor="middle" {FONT} font-weight="bold">{escape(title)}</text>',
        *body, "</svg>", ""])


def histogram(labels: list[str], counts: list[int], title: str, x_label: str) -> str:
    """A vertical bar chart: one bar per label, its count written above it.

    The plot starts low enough that the count over the tallest bar (baseline 4 above the bar, glyphs
    FONT_SIZE above that) stays clear of the title's line."""
    bar, gap, left, plot_h = 36, 8, 40, 160
    top = TITLE_Y + 8 + 4 + FONT_SIZE
    width = left + len(labels) * (bar + gap) + 20
    height = top + plot_h + 50
    peak = max(counts) if counts and max(counts) > 0 else 1
    body = [f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" stroke="#333"/>']
    for i, (label, count) in enumerate(zip(labels, counts)):
        h = round(plot_h * count / peak)
        x = left + i * (bar + gap)
        y = top + plot_h - h
        body.append(f'<rect x="{x}" y="{y}" width="{bar}" height="{h}" fill="#4a78b5"/>')
        body.append(f'<text x="{x + bar // 2}" y="{y - 4}" text-anchor="middle" {FONT}>{count}</text>')
        body.append(f'<text x="{x + bar // 2}" y="{top + plot_h + 16}" text-anchor="middle" {FONT}>'
                    f"{escape(label)}</text>")
    body.append(f'<text x="{width // 2}" y="{height - 10}" text-anchor="middle" {FONT}>{escape(x_label)}</text>')
    return _svg(width, height, body, title)


def _cell_colour(expected: str, actual: str, count: int) -> str:
    """Green on the diagonal, red for BAD<->GOOD (the fatal cross-band cells), amber otherwise."""
    if count == 0:
        return "#f4f4f4"
    if expected == actual:
        return "#9fd49f"
    if {expected, actual} == {"BAD", "GOOD"}:
        return "#e58a8a"
    return "#f2d28b"


def confusion_matrix(zones: tuple[str, ...], matrix: dict[str, dict[str, int]], title: str) -> str:
    """A zones x zones grid (rows expected, columns actual) with the count in each cell."""
    cell, left, top = 70, 110, 60
    width = left + cell * len(zones) + 20
    height = top + cell * len(zones) + 20
    body = [f'<text x="{left + cell * len(zones) // 2}" y="40" text-anchor="middle" {FONT}>actual zone</text>',
            f'<text x="14" y="{top + cell * len(zones) // 2}" {FONT} transform="rotate(-90 14 '
            f'{top + cell * len(zones) // 2})" text-anchor="middle">expected zone</text>']
    for j, zone in enumerate(zones):
        body.append(f'<text x="{left + j * cell + cell // 2}" y="{top - 6}" text-anchor="middle" {FONT}>{zone}</text>')
    for i, expected in enumerate(zones):
        body.append(f'<text x="{left - 8}" y="{top + i * cell + cell // 2 + 4}" text-anchor="end" {FONT}>{expected}</text>')
        for j, actual in enumerate(zones):
            count = matrix[expected][actual]
            x, y = left + j * cell, top + i * cell
            body.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" '
                        f'fill="{_cell_colour(expected, actual, count)}" stroke="#555"/>')
            body.append(f'<text x="{x + cell // 2}" y="{y + cell // 2 + 5}" text-anchor="middle" '
                        f'font-family="sans-serif" font-size="16">{count}</text>')
    return _svg(width, height, body, title)


def rate_bars(labels: list[str], rates: list[float | None], intervals: list[list[float] | None],
              title: str) -> str:
    """Horizontal bars of rates in [0, 1] (one per label) with their 95% interval as a whisker."""
    left, width_plot, row, top = 160, 300, 28, 34
    width = left + width_plot + 70
    height = top + row * len(labels) + 30
    body = [f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{top + row * len(labels)}" stroke="#333"/>']
    for tick in (0, 25, 50, 75, 100):
        x = left + width_plot * tick // 100
        body.append(f'<text x="{x}" y="{height - 10}" text-anchor="middle" {FONT}>{tick}%</text>')
    for i, (label, rate, ci) in enumerate(zip(labels, rates, intervals)):
        y = top + i * row
        body.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" {FONT}>{escape(label[:24])}</text>')
        if rate is None:
            body.append(f'<text x="{left + 6}" y="{y + 15}" {FONT}>n/a</text>')
            continue
        w = round(width_plot * rate)
        body.append(f'<rect x="{left}" y="{y + 4}" width="{w}" height="{row - 10}" fill="#4a78b5"/>')
        if ci:
            x1, x2 = left + round(width_plot * ci[0]), left + round(width_plot * ci[1])
            mid = y + row // 2 - 1
            body.append(f'<line x1="{x1}" y1="{mid}" x2="{x2}" y2="{mid}" stroke="#222" stroke-width="2"/>')
            body.append(f'<line x1="{x1}" y1="{mid - 5}" x2="{x1}" y2="{mid + 5}" stroke="#222"/>')
            body.append(f'<line x1="{x2}" y1="{mid - 5}" x2="{x2}" y2="{mid + 5}" stroke="#222"/>')
        body.append(f'<text x="{left + width_plot + 8}" y="{y + 15}" {FONT}>{rate * 100:.1f}%</text>')
    return _svg(width, height, body, title)
