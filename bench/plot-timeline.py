#!/usr/bin/env python3
"""Plot `rtgs demo --latency-timeline` CSV files as one SVG (no dependencies beyond Python 3).

    bench/plot-timeline.py OUT.svg LABEL=before.csv LABEL=after.csv ...

One panel per file, stacked, sharing a logarithmic latency axis (50 us .. the largest max):
per 100 ms slice the p99 as a line, the max as dots, and a red band where nothing became final
(a stall). A dashed line marks 1 ms (the p99 target of the embedded engine at 100,000/s).
"""

import csv
import math
import sys

WIDTH, PANEL_H, MARGIN_L, MARGIN_R, MARGIN_T, GAP = 900, 200, 70, 20, 30, 50
COLORS = {"p50": "#2a9d8f", "p99": "#264653", "max": "#e76f51"}


def read(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            def num(k):
                v = r.get(k, "")
                return float(v) if v not in ("", None) else None

            rows.append({"t": float(r["t_s"]), "n": int(r["finalized"]), "p50": num("p50_us"),
                         "p99": num("p99_us"), "max": num("max_us")})
    if not rows:
        sys.exit(f"{path}: no rows")
    return rows


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    out = argv[1]
    series = [(a.split("=", 1)[0], read(a.split("=", 1)[1])) for a in argv[2:]]
    t_max = max(r["t"] for _, rows in series for r in rows) + 0.1
    lat_max = max((r["max"] or 0) for _, rows in series for r in rows)
    lo, hi = math.log10(50), math.log10(max(lat_max, 2000) * 1.2)
    plot_w = WIDTH - MARGIN_L - MARGIN_R
    height = MARGIN_T + len(series) * (PANEL_H + GAP)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>']

    for i, (label, rows) in enumerate(series):
        top = MARGIN_T + i * (PANEL_H + GAP)

        def x(t):
            return MARGIN_L + plot_w * t / t_max

        def y(us):
            v = (math.log10(max(us, 50)) - lo) / (hi - lo)
            return top + PANEL_H * (1 - v)

        ms = [r for r in rows if r["max"] is not None]
        worst = max((r["max"] for r in ms), default=0)
        stalls = sum(1 for r in rows if r["n"] == 0)
        svg.append(f'<text x="{MARGIN_L}" y="{top - 8}" font-size="13" font-weight="bold">{label}'
                   f'</text><text x="{WIDTH - MARGIN_R}" y="{top - 8}" text-anchor="end">'
                   f'{len(rows)} slices of 100 ms, {stalls} empty, worst max {worst / 1000:.1f} ms</text>')
        svg.append(f'<rect x="{MARGIN_L}" y="{top}" width="{plot_w}" height="{PANEL_H}" '
                   f'fill="none" stroke="#999"/>')
        for r in rows:
            if r["n"] == 0:
                svg.append(f'<rect x="{x(r["t"]):.1f}" y="{top}" width="{plot_w * 0.1 / t_max:.1f}" '
                           f'height="{PANEL_H}" fill="#fcc"/>')
        decade = 10 ** math.floor(lo)
        while decade <= 10 ** hi:
            for m in (1, 2, 5):
                v = decade * m
                if lo <= math.log10(v) <= hi:
                    text = f"{v / 1000:g} ms" if v >= 1000 else f"{v:g} us"
                    svg.append(f'<line x1="{MARGIN_L}" x2="{WIDTH - MARGIN_R}" y1="{y(v):.1f}" '
                               f'y2="{y(v):.1f}" stroke="#eee"/><text x="{MARGIN_L - 4}" '
                               f'y="{y(v) + 4:.1f}" text-anchor="end">{text}</text>')
            decade *= 10
        svg.append(f'<line x1="{MARGIN_L}" x2="{WIDTH - MARGIN_R}" y1="{y(1000):.1f}" '
                   f'y2="{y(1000):.1f}" stroke="#888" stroke-dasharray="4 3"/>')
        for k in ("p50", "p99"):
            pts = " ".join(f'{x(r["t"] + 0.05):.1f},{y(r[k]):.1f}' for r in ms)
            svg.append(f'<polyline points="{pts}" fill="none" stroke="{COLORS[k]}" '
                       f'stroke-width="1.5"/>')
        for r in ms:
            svg.append(f'<circle cx="{x(r["t"] + 0.05):.1f}" cy="{y(r["max"]):.1f}" r="1.8" '
                       f'fill="{COLORS["max"]}"/>')
        for s in range(0, int(t_max) + 1):
            svg.append(f'<text x="{x(s):.1f}" y="{top + PANEL_H + 14}" text-anchor="middle">{s} s</text>')
        lx = MARGIN_L + 8
        for k in ("p50", "p99", "max"):
            svg.append(f'<rect x="{lx}" y="{top + 6}" width="10" height="10" fill="{COLORS[k]}"/>'
                       f'<text x="{lx + 14}" y="{top + 15}">{k}</text>')
            lx += 50
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv)
