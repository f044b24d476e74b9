#!/usr/bin/env python3
"""svg_check.py — what a reader of our SVG pictures must be able to trust,
checked on the file (used by tests/svg_plots.py; standard library only).

    svg_check.py FILE.svg [FILE.svg ...]

- Tick labels (<text class="tick" data-axis="x|y" data-value="V">) sit at
  round values: the ticks of one axis are equally spaced by 1, 2 or 5
  times a power of ten, each a whole multiple of that step, and the label
  shows V. In a file without such marks (an older writer's), every text
  that is a number with an optional unit counts as a tick, on the y axis
  when it is anchored at its end and on the x axis otherwise.
- No two text boxes overlap, no text box covers a marker (a <circle>, or a
  <rect> of class "marker" or "swatch"), and every text box lies inside the
  picture.

Text boxes are estimated conservatively, as no renderer is asked: each
character 0.65 x the font size wide (DejaVu Sans digits are 0.64), a full
font size high (0.8 above the baseline, 0.2 below). Exits 1 and lists the faults when any is found.
"""
import math
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
CHAR_W = 0.65
ASCENT, DESCENT = 0.8, 0.2


def _num(s, default=0.0):
    if s is None:
        return default
    m = re.match(r"\s*(-?[0-9.]+)", s)
    return float(m.group(1)) if m else default


def _rotate(box, angle, cx, cy):
    """The bounding box of box rotated by angle degrees about (cx, cy)."""
    a = math.radians(angle)
    xs, ys = [], []
    for x in (box[0], box[2]):
        for y in (box[1], box[3]):
            dx, dy = x - cx, y - cy
            xs.append(cx + dx * math.cos(a) - dy * math.sin(a))
            ys.append(cy + dx * math.sin(a) + dy * math.cos(a))
    return (min(xs), min(ys), max(xs), max(ys))


def _walk(el, size, anchor, out):
    """Collects (element, font size, text anchor) for every element, with
    the sizes and anchors inherited from the enclosing groups."""
    size = _num(el.get("font-size"), size)
    anchor = el.get("text-anchor", anchor)
    out.append((el, size, anchor))
    for child in el:
        _walk(child, size, anchor, out)


def text_box(el, size, anchor):
    """(x0, y0, x1, y1) of a <text>, by the estimate above."""
    text = "".join(el.itertext())
    w = CHAR_W * size * len(text)
    x, y = _num(el.get("x")), _num(el.get("y"))
    x0 = {"middle": x - w / 2, "end": x - w}.get(anchor, x)
    box = (x0, y - ASCENT * size, x0 + w, y + DESCENT * size)
    m = re.match(r"\s*rotate\(\s*(-?[0-9.]+)[ ,]+(-?[0-9.]+)[ ,]+(-?[0-9.]+)\s*\)",
                 el.get("transform", ""))
    if m:
        box = _rotate(box, *(float(g) for g in m.groups()))
    elif el.get("transform"):
        raise ValueError("text transform %r not understood" % el.get("transform"))
    return box


def marker_box(el):
    if el.tag == NS + "circle":
        cx, cy, r = (_num(el.get(k)) for k in ("cx", "cy", "r"))
        return (cx - r, cy - r, cx + r, cy + r)
    x, y = _num(el.get("x")), _num(el.get("y"))
    return (x, y, x + _num(el.get("width")), y + _num(el.get("height")))


def overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def is_round_step(step):
    """1, 2 or 5 times a power of ten."""
    if step <= 0:
        return False
    mant = step / 10 ** math.floor(math.log10(step))
    return any(abs(mant - m) < 1e-6 for m in (1, 2, 5, 10))


UNMARKED_TICK = re.compile(r"\s*(-?[0-9]+(\.[0-9]+)?)\s*(MiB|KiB|GiB|B|x|\u00d7|%)?\s*$")


def check_ticks(ticks):
    """ticks: (element, text anchor) of each tick label."""
    faults = []
    axes = {}
    for el, anchor in ticks:
        text = "".join(el.itertext())
        shown = re.search(r"-?[0-9]+(\.[0-9]+)?", text)
        v = float(el.get("data-value", shown.group(0) if shown else "nan"))
        if not shown or abs(float(shown.group(0)) - v) > 1e-9 * max(1, abs(v)):
            faults.append("tick label %r does not show its value %g" % (text, v))
        axis = el.get("data-axis", "y" if anchor == "end" else "x")
        axes.setdefault(axis, []).append(v)
    for axis, vals in axes.items():
        vals = sorted(vals)
        if len(vals) < 2:
            faults.append("axis %s has fewer than two ticks" % axis)
            continue
        step = vals[1] - vals[0]
        if not is_round_step(step):
            faults.append("axis %s: tick step %g is not 1, 2 or 5 x 10^k" % (axis, step))
        for a, b in zip(vals, vals[1:]):
            if abs((b - a) - step) > 1e-6 * step:
                faults.append("axis %s: ticks %g, %g not %g apart" % (axis, a, b, step))
        for v in vals:
            if step > 0 and abs(v / step - round(v / step)) > 1e-6:
                faults.append("axis %s: tick %g is not a multiple of %g" % (axis, v, step))
    return faults


def check(path):
    """The faults found in one SVG file, as sentences."""
    root = ET.parse(path).getroot()
    W, H = _num(root.get("width")), _num(root.get("height"))
    els = []
    _walk(root, 16.0, "start", els)
    marked = any("tick" in el.get("class", "").split() for el, _, _ in els)
    texts, markers, ticks = [], [], []
    for el, size, anchor in els:
        cls = el.get("class", "").split()
        if el.tag == NS + "text":
            s = "".join(el.itertext())
            texts.append((s, text_box(el, size, anchor)))
            if "tick" in cls or (not marked and UNMARKED_TICK.match(s)):
                ticks.append((el, anchor))
        elif el.tag == NS + "circle" or (el.tag == NS + "rect" and
                                         ("marker" in cls or "swatch" in cls)):
            markers.append(marker_box(el))
    faults = check_ticks(ticks)
    if not ticks:
        faults.append("no tick labels found")
    for i, (s, b) in enumerate(texts):
        if b[0] < 0 or b[1] < 0 or b[2] > W or b[3] > H:
            faults.append("text %r (%.0f,%.0f)-(%.0f,%.0f) leaves the %gx%g frame"
                          % ((s,) + b + (W, H)))
        for s2, b2 in texts[i + 1:]:
            if overlap(b, b2):
                faults.append("texts %r and %r overlap" % (s, s2))
        for m in markers:
            if overlap(b, m):
                faults.append("text %r covers a marker at (%.0f,%.0f)" % (s, m[0], m[1]))
    return faults


def main():
    bad = 0
    for path in sys.argv[1:]:
        faults = check(path)
        for f in faults:
            print("%s: %s" % (path, f))
        if not faults:
            print("%s: ticks round, no text overlaps or leaves the frame" % path)
        bad += bool(faults)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
