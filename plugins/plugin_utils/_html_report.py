# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Self-contained HTML pages for the build report and the preflight report (pure).

One file each, readable offline and attachable to a ticket: inline CSS and inline SVG only - no script, no
font, no image, no link to anywhere (a test loads them in headless Chromium and checks nothing is fetched).
Every text from a node is escaped here (``html.escape``), on top of the reports' own control-character escaping.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from html import escape

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report

BUILD_SIGNATURE = "<!DOCTYPE html>\n<!-- gpufleet.preflight build report -->"
PREFLIGHT_SIGNATURE = "<!DOCTYPE html>\n<!-- gpufleet.preflight preflight report -->"
WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 14, 28
STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d232a;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px}
.summary{color:#444;margin:0 0 16px}
table{border-collapse:collapse;margin:8px 0 12px}th,td{border:1px solid #d0d5db;padding:3px 8px;text-align:left}
th{background:#eef1f4}td.num{text-align:right}
.done,.ready{color:#176f2c;font-weight:600}.failed,.not_ready{color:#b3261e;font-weight:600}
.unreachable{color:#7a4b00;font-weight:600}
svg.chart{display:block;border:1px solid #d0d5db;background:#fbfcfd;margin:4px 0}
svg text{font:11px system-ui,sans-serif;fill:#444}
.legend span{margin-right:14px}.sw{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:4px}
"""


def _e(value):
    return escape("-" if value is None else str(value), quote=True)


def _page(signature, title, body):
    return "%s\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head>" \
           "<body>\n%s\n</body></html>\n" % (signature, _e(title), STYLE, body)


def _table(header, rows, numeric=()):
    out = ["<table><thead><tr>%s</tr></thead><tbody>" % "".join("<th>%s</th>" % _e(h) for h in header)]
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            klass = ' class="num"' if index in numeric else ""
            if isinstance(cell, tuple):  # (text, css class)
                klass, cell = ' class="%s"' % _e(cell[1]), cell[0]
            cells.append("<td%s>%s</td>" % (klass, _e(cell)))
        out.append("<tr>%s</tr>" % "".join(cells))
    out.append("</tbody></table>")
    return "\n".join(out)


# ---------------------------------------------------------------- the memory chart

def chart_points(timeline, span, top, width=WIDTH, height=HEIGHT):
    """Timeline samples -> SVG ``x,y`` points in the plot area (time on x over ``span`` s, memory on y up to ``top``)."""
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    points = []
    for sample in timeline:
        x = LEFT + plot_w * (float(sample[0]) / span if span else 0.0)
        y = TOP + plot_h * (1.0 - (float(sample[1]) / top if top else 0.0))
        points.append("%.1f,%.1f" % (x, y))
    return points


def memory_chart(name, entry, width=WIDTH, height=HEIGHT):
    """One node's memory over time: the memory line, the budget (dashed red), each backoff (orange, labelled)."""
    timeline = entry.get("timeline") or []
    limit = entry.get("memory_limit_bytes") or 0
    peak = max([s[1] for s in timeline] + [entry.get("peak_memory_bytes") or 0])
    top = max(limit, peak, 1) * 1.1
    span = max([float(s[0]) for s in timeline] + [float(entry.get("duration") or 0), 1.0])
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    parts = ['<svg class="chart" role="img" width="%d" height="%d" '
             'viewBox="0 0 %d %d" data-node="%s"><title>%s: memory over time</title>' % (
                 width, height, width, height, _e(name), _e(name))]
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#fff" stroke="#c7cdd4"/>' % (LEFT, TOP, plot_w, plot_h))
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h * (1 - fraction)
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (LEFT - 4, y + 4, _e(human(int(top * fraction)))))
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (
            LEFT + plot_w * fraction, height - 8, _e(view.duration(span * fraction))))
    if limit:
        y = TOP + plot_h * (1 - limit / top)
        parts.append('<line class="budget" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#b3261e" stroke-width="1.5" '
                     'stroke-dasharray="6 4"/>' % (LEFT, y, LEFT + plot_w, y))
        parts.append('<text x="%d" y="%.1f" text-anchor="end" style="fill:#b3261e">budget %s</text>' % (
            LEFT + plot_w - 4, y - 4, _e(human(limit))))
    for event in entry.get("events") or []:
        x = LEFT + plot_w * (float(event["t"]) / span)
        parts.append('<line class="event" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d26a00" stroke-width="2"><title>%s'
                     '</title></line>' % (x, TOP, x, TOP + plot_h, _e(event["label"])))
        parts.append('<text x="%.1f" y="%d" style="fill:#d26a00">%s</text>' % (x + 3, TOP + 12, _e(
            "OOM" if event["kind"] == "oom" else event["kind"])))
    points = chart_points(timeline, span, top, width, height)
    if points:
        base = TOP + plot_h
        parts.append('<polygon fill="#2f6fb5" fill-opacity="0.15" points="%.1f,%d %s %s,%d"/>' % (
            float(points[0].split(",")[0]), base, " ".join(points), points[-1].split(",")[0], base))
        parts.append('<polyline class="memory" fill="none" stroke="#2f6fb5" stroke-width="2" points="%s"/>' % " ".join(points))
    else:
        parts.append('<text x="%d" y="%d" text-anchor="middle">no memory samples</text>' % (LEFT + plot_w // 2, TOP + plot_h // 2))
    parts.append("</svg>")
    return "".join(parts)


LEGEND = ('<p class="legend"><span><i class="sw" style="background:#2f6fb5"></i>memory in use</span>'
          '<span><i class="sw" style="background:#b3261e"></i>budget (the build cgroup\'s limit)</span>'
          '<span><i class="sw" style="background:#d26a00"></i>OOM kill / backoff</span></p>')


def render_build_html(report):
    """The build report as one self-contained HTML page: fleet summary, a row per node, then per node its attempts
    and memory chart."""
    rows = []
    for name, entry in sorted(report["nodes"].items()):
        rows.append((name, (entry["phase"], entry["phase"]), " → ".join(str(a["jobs"]) for a in entry["attempts"]) or "-",
                     entry["backoffs"], entry["oom_kills"], entry["peak_memory_human"], entry["memory_limit_human"],
                     view.duration(entry["duration"]), entry["first_failed_step"] or "-"))
    body = ["<h1>Fleet build</h1>", '<p class="summary">%s; report written %s</p>' % (
        _e(view.summary_line(report)), _e(report.get("finished"))),
        _table(("node", "phase", "jobs per attempt", "backoffs", "OOM kills", "peak", "budget", "duration",
                "first failed step"), rows, numeric=(3, 4)), LEGEND]
    for name, entry in sorted(report["nodes"].items()):
        body.append('<section class="node"><h2>%s <small class="%s">%s</small></h2>' % (
            _e(name), _e(entry["phase"]), _e(entry["phase"])))
        if entry["message"]:
            body.append("<p>%s</p>" % _e(entry["message"]))
        body.append(memory_chart(name, entry))
        if entry["attempts"]:
            body.append(_table(("attempt", "jobs", "duration", "peak", "OOM kills", "ended", "why"), [
                (a["attempt"], a["jobs"], view.duration(a["duration"]), a["peak_memory_human"], a["oom_kills"],
                 a["kind"], a["why"]) for a in entry["attempts"]], numeric=(0, 1, 4)))
        body.append("</section>")
    return _page(BUILD_SIGNATURE, "Fleet build", "\n".join(body))


# ---------------------------------------------------------------- the preflight page

def memory_bar(name, entry, width=WIDTH, height=44):
    """One host's memory: total, and the part available (effective, container-aware)."""
    memory = entry.get("memory") or {}
    total = memory.get("effective_total_bytes") or 0
    available = memory.get("effective_available_bytes") or 0
    plot_w = width - LEFT - RIGHT
    parts = ['<svg class="chart" role="img" width="%d" height="%d" '
             'viewBox="0 0 %d %d" data-node="%s"><title>%s: memory</title>' % (width, height, width, height, _e(name), _e(name))]
    parts.append('<text x="%d" y="22" text-anchor="end">%s</text>' % (LEFT - 4, _e(name)[:10]))
    parts.append('<rect x="%d" y="8" width="%d" height="20" fill="#e5e8ec"/>' % (LEFT, plot_w))
    if total:
        used_w = plot_w * max(0.0, min(1.0, float(total - available) / total))
        parts.append('<rect class="used" x="%d" y="8" width="%.1f" height="20" fill="#2f6fb5"/>' % (LEFT, used_w))
        parts.append('<text x="%d" y="40">%s available of %s%s</text>' % (
            LEFT, _e(memory.get("effective_available_human")), _e(memory.get("effective_total_human")),
            _e(" (cgroup limit; host %s)" % memory.get("host_total_human") if memory.get("limited_by") == "cgroup" else "")))
    else:
        parts.append('<text x="%d" y="40">no memory facts (%s)</text>' % (LEFT, _e(entry.get("status"))))
    parts.append("</svg>")
    return "".join(parts)


def render_preflight_html(report):
    """The preflight fleet report as one self-contained HTML page: the table, the failed checks, memory bars."""
    rows = _report.table_rows(report)
    body = ["<h1>Fleet preflight</h1>", '<p class="summary">%s; checked %s</p>' % (
        _e(_report.summary_line(report)), _e(report.get("finished"))),
        _table(rows[0], [(r[0], (r[1], r[1].replace(" ", "_"))) + tuple(r[2:]) for r in rows[1:]], numeric=(3,))]
    failures = [(name, c) for name, entry in sorted(report["hosts"].items()) for c in entry["checks"]
                if c.get("status") in ("failed", "unknown")]
    unreachable = [(name, entry) for name, entry in sorted(report["hosts"].items()) if entry["status"] == "unreachable"]
    if failures or unreachable:
        body.append("<h2>Failed checks</h2><ul>")
        body.extend("<li><b>%s</b> <code>%s</code>: %s</li>" % (_e(name), _e(c["name"]), _e(c.get("message")))
                    for name, c in failures)
        body.extend("<li><b>%s</b>: %s</li>" % (_e(name), _e(entry["reason"])) for name, entry in unreachable)
        body.append("</ul>")
    body.append("<h2>Memory per node</h2>")
    body.extend(memory_bar(name, entry) for name, entry in sorted(report["hosts"].items()))
    return _page(PREFLIGHT_SIGNATURE, "Fleet preflight", "\n".join(body))
