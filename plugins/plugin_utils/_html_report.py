# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Self-contained HTML pages for the build report and the preflight report, rendered from Jinja2 templates.

One file each, readable offline and attachable to a ticket: inline CSS and inline SVG only - no script, no
font, no image, no link to anywhere (a test loads them in headless Chromium and checks nothing is fetched).

The templates ship in the collection (``roles/preflight/templates/gpufleet_*.html.j2``, docs/architecture.md says
why there) and are rendered with autoescape on: every text from a node is escaped by Jinja2, on top of the reports'
own control- and format-character escaping. A user's own template (``template``) is searched first, so it can
replace a page or ``{% extends %}`` the shipped one. The drawing is computed here (pure functions, unit-tested):
a chart is a dict of coordinates and labels, the template only writes the SVG elements.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from jinja2 import Environment, FileSystemLoader, StrictUndefined, TemplateNotFound, TemplateSyntaxError

from ansible_collections.gpufleet.preflight.plugins.module_utils._human import human
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _build_view as view
from ansible_collections.gpufleet.preflight.plugins.plugin_utils import _report

BUILD_SIGNATURE = "<!DOCTYPE html>\n<!-- gpufleet.preflight build report -->"
PREFLIGHT_SIGNATURE = "<!DOCTYPE html>\n<!-- gpufleet.preflight preflight report -->"
TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "roles", "preflight", "templates")
PREFLIGHT_TEMPLATE = "gpufleet_preflight.html.j2"
BUILD_TEMPLATE = "gpufleet_build.html.j2"
WIDTH, HEIGHT = 640, 234
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 14, 28
LANE = 34              # the jobs lane under the memory plot: its height, gap included
OPEN_UP_TO = 50        # hosts: the host table and the grid are open up to this many, folded (<details>) above
MESSAGES_SHOWN = 8     # per failure group; the rest folded
LABEL_CHARS = 24


class TemplateError(ValueError):
    """A user template that cannot be found or read, said in words naming it."""


_ENVIRONMENTS = {}


def environment(template_dir=None):
    """The Jinja2 environment: autoescape on, undefined names an error; ``template_dir`` searched before the
    shipped templates."""
    dirs = ([template_dir] if template_dir else []) + [TEMPLATE_DIR]
    key = tuple(dirs)
    if key not in _ENVIRONMENTS:
        env = Environment(loader=FileSystemLoader(dirs), autoescape=True, undefined=StrictUndefined,
                          trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
        env.filters["human"] = human
        env.filters["duration"] = view.duration
        env.filters["label"] = label
        _ENVIRONMENTS[key] = env
    return _ENVIRONMENTS[key]


def render(name, template=None, **context):
    """Render the shipped template ``name``, or the user's ``template`` (a path) instead."""
    template_dir = None
    if template:
        template_dir, name = os.path.split(os.path.abspath(template))
    try:
        return environment(template_dir).get_template(name).render(**context)
    except TemplateNotFound:
        raise TemplateError("template: %s was not found" % (template or os.path.join(TEMPLATE_DIR, name)))
    except TemplateSyntaxError as exc:
        raise TemplateError("template: %s line %s: %s" % (template or name, exc.lineno, exc.message))


def label(text, limit=LABEL_CHARS):
    """A label cut to ``limit`` characters with an ellipsis, BEFORE it is escaped (the template escapes it): a cut
    never falls inside an entity."""
    text = "-" if text is None else str(text)
    return text if len(text) <= limit else text[:limit - 1] + u"\u2026"


# ---------------------------------------------------------------- the build's memory chart

def chart_points(timeline, span, top, width=WIDTH, height=HEIGHT):
    """Timeline samples -> SVG ``x,y`` points in the plot area (time on x over ``span`` s, memory on y up to ``top``)."""
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM - LANE
    points = []
    for sample in timeline:
        x = LEFT + plot_w * (float(sample[0]) / span if span else 0.0)
        y = TOP + plot_h * (1.0 - (float(sample[1]) / top if top else 0.0))
        points.append("%.1f,%.1f" % (x, y))
    return points


def attempt_starts(entry):
    """``{attempt: seconds since the build started}``: its first timeline sample, else the durations before it."""
    starts = {}
    for sample in entry.get("timeline") or []:
        starts.setdefault(sample[3], float(sample[0]))
    elapsed = 0.0
    for attempt in entry.get("attempts") or []:
        starts.setdefault(attempt.get("attempt"), elapsed)
        elapsed += attempt.get("duration") or 0
    return starts


def peak_markers(entry):
    """Each attempt's recorded peak, where it happened: ``[{t, bytes, attempt}]``. The time is the attempt's
    highest timeline sample (its start when it has none); the height is the recorded peak, so the chart reaches
    what the table says even when no sample caught it."""
    timeline = entry.get("timeline") or []
    starts = attempt_starts(entry)
    markers = []
    for attempt in entry.get("attempts") or []:
        peak = attempt.get("peak_memory_bytes")
        if not peak:
            continue
        own = [s for s in timeline if s[3] == attempt.get("attempt")]
        moment = max(own, key=lambda s: s[1])[0] if own else starts.get(attempt.get("attempt"), 0.0)
        markers.append(dict(t=float(moment), bytes=peak, attempt=attempt.get("attempt")))
    return markers


def jobs_steps(entry):
    """Jobs over time as ``[(t, jobs)]`` steps: from the timeline's samples, else one step per attempt."""
    steps = []
    for sample in entry.get("timeline") or []:
        if len(sample) > 2 and (not steps or steps[-1][1] != sample[2]):
            steps.append((float(sample[0]), sample[2]))
    if not steps:
        starts = attempt_starts(entry)
        steps = [(starts.get(a.get("attempt"), 0.0), a.get("jobs")) for a in entry.get("attempts") or []
                 if isinstance(a.get("jobs"), int)]
    return steps


def memory_chart(name, entry, width=WIDTH, height=HEIGHT):
    """One node's build as a chart: memory (each interval's maximum), the budget, each attempt's peak, each backoff,
    and under it the jobs lane (a step line, labelled at each change). Returns the coordinates the template draws."""
    timeline = entry.get("timeline") or []
    limit = entry.get("memory_limit_bytes") or 0
    markers = peak_markers(entry)
    peak = max([s[1] for s in timeline] + [m["bytes"] for m in markers] + [entry.get("peak_memory_bytes") or 0])
    top = max(limit, peak, 1) * 1.1
    span = max([float(s[0]) for s in timeline] + [float(entry.get("duration") or 0), 1.0])
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM - LANE

    def x_at(seconds):
        return LEFT + plot_w * min(1.0, float(seconds) / span)

    def y_at(value):
        return TOP + plot_h * (1 - float(value) / top)

    chart = dict(name=name, width=width, height=height, left=LEFT, top=TOP, plot_w=plot_w, plot_h=plot_h,
                 base=TOP + plot_h, right=LEFT + plot_w, points=" ".join(chart_points(timeline, span, top, width, height)),
                 yticks=[dict(y=TOP + plot_h * (1 - f), label=human(int(top * f))) for f in (0.0, 0.5, 1.0)],
                 xticks=[dict(x=LEFT + plot_w * f, label=view.duration(span * f)) for f in (0.0, 0.5, 1.0)],
                 budget=dict(y=y_at(limit), label="budget %s" % human(limit)) if limit else None,
                 peaks=[dict(x=x_at(m["t"]), y=y_at(m["bytes"]), label="peak %s" % human(m["bytes"]),
                             # near the right edge the label goes left of its marker, never out of the chart
                             anchor="end" if x_at(m["t"]) > LEFT + plot_w - 80 else "start",
                             label_x=x_at(m["t"]) - 7 if x_at(m["t"]) > LEFT + plot_w - 80 else x_at(m["t"]) + 7,
                             title="attempt %s: peak %s" % (m["attempt"], human(m["bytes"]))) for m in markers],
                 events=[dict(x=x_at(e["t"]), label=e["label"], kind="OOM" if e["kind"] == "oom" else e["kind"])
                         for e in entry.get("events") or []])
    steps = jobs_steps(entry)
    most = max([jobs for _t, jobs in steps] + [1])
    lane_top, lane_h = TOP + plot_h + 6, 22.0

    def y_jobs(jobs):
        return lane_top + lane_h * (1 - float(jobs) / most)

    points = []
    for index, (moment, jobs) in enumerate(steps):
        end = steps[index + 1][0] if index + 1 < len(steps) else span
        points.append("%.1f,%.1f %.1f,%.1f" % (x_at(moment), y_jobs(jobs), x_at(end), y_jobs(jobs)))
    chart.update(lane_top=lane_top, lane_h=lane_h, jobs_points=" ".join(points),
                 jobs_labels=[dict(x=x_at(moment) + 3, y=min(y_jobs(jobs) + 11, lane_top + lane_h), label="%s jobs" % jobs)
                              for moment, jobs in steps])
    return chart


def render_build_html(report, template=None):
    """The build report as one self-contained HTML page: fleet summary, a row per node, then per node its attempts
    and memory chart."""
    nodes = []
    for name, entry in sorted(report["nodes"].items()):
        nodes.append(dict(name=name, entry=entry, chart=memory_chart(name, entry),
                          jobs=" → ".join(str(a["jobs"]) for a in entry["attempts"]) or "-",
                          peaks=" → ".join(a["peak_memory_human"] or "-" for a in entry["attempts"]) or "-"))
    return render(BUILD_TEMPLATE, template, signature=BUILD_SIGNATURE, report=report, nodes=nodes,
                  summary=view.summary_line(report))


# ---------------------------------------------------------------- the preflight page

MIN_BAR_PX = 3.0


def fleet_memory_chart(report, width=960, height=220):
    """Every host's memory in one chart: hosts sorted by effective available memory (lowest first), a bar each
    (available, over the light effective total), red when below the host's required minimum; the minimum as one
    dashed line when every host has the same, else a tick on each bar. Hosts without memory facts are listed."""
    known, missing = [], []
    for name, entry in sorted(report["hosts"].items()):
        memory = entry.get("memory") or {}
        if isinstance(memory.get("effective_available_bytes"), (int, float)) and memory.get("effective_total_bytes"):
            known.append((memory["effective_available_bytes"], name, memory))
        else:
            missing.append(name)
    known.sort(key=lambda item: (item[0], item[1]))
    labelled = 0 < len(known) <= 40
    longest = max([len(label(name)) for _a, name, _m in known] + [0]) if labelled else 0
    left, right, top, bottom = 64, 12, 16, (min(110, 26 + int(longest * 3.8)) if labelled else 30)
    height += bottom - 30
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max([m["effective_total_bytes"] for _a, _n, m in known] + [m.get("required_bytes") or 0 for _a, _n, m in known] + [1])
    scale = plot_h / float(most) / 1.05
    slot = plot_w / float(max(len(known), 1))
    gap = 0.0 if slot < 4 else min(slot * 0.2, 6.0)
    required = set(m.get("required_bytes") for _a, _n, m in known)
    one_required = required.pop() if len(required) == 1 else None
    bars = []
    for index, (available, name, memory) in enumerate(known):
        need = memory.get("required_bytes")
        x = left + index * slot + gap / 2
        title = "%s: %s available of %s%s" % (name, memory.get("effective_available_human"), memory.get("effective_total_human"),
                                              "; requires %s" % human(need) if need else "")
        total = memory["effective_total_bytes"]
        # at least MIN_BAR_PX tall: the worst hosts of 500 (a few MiB of 24 GiB) drew 0.3 px bars nobody could see
        bar_h = max(available * scale, MIN_BAR_PX)
        bars.append(dict(name=name, x=x, w=max(slot - gap, 1.0), total_y=top + plot_h - total * scale, total_h=total * scale,
                         y=top + plot_h - bar_h, h=bar_h, title=title,
                         below=need is not None and available < need,
                         need_y=top + plot_h - need * scale if need is not None and one_required is None else None))
    labels = []
    if labelled:
        labels = [dict(x=b["x"] + b["w"] / 2, y=top + plot_h + 12, text=b["name"]) for b in bars]
    return dict(width=width, height=height, left=left, top=top, plot_w=plot_w, plot_h=plot_h, base=top + plot_h,
                bars=bars, labels=labels, missing=missing, below=sum(1 for b in bars if b["below"]),
                required=dict(y=top + plot_h - one_required * scale, label="required %s" % human(one_required))
                if one_required else None,
                per_host_required=one_required is None and any(b["need_y"] is not None for b in bars),
                yticks=[dict(y=top + plot_h - most * f * scale, label=human(int(most * f))) for f in (0.0, 0.5, 1.0)],
                lowest=[(name, memory.get("effective_available_human")) for _a, name, memory in known[:5]])


def policy_items(policy):
    """The policy as ``[(option, value as text)]``, sorted."""
    items = []
    for key, value in sorted((policy or {}).items()):
        if isinstance(value, (list, tuple)) and len(value) == 2 and value[0] in ("absolute", "fraction") and \
                isinstance(value[1], (int, float)):
            value = human(value[1]) if value[0] == "absolute" else "%g of the effective total" % value[1]
        items.append((str(key), policy_text(value)))
    return items


def policy_text(value):
    """An option's value as the user wrote it in YAML (``false``, ``[]``), not Python's ``False``; unset says so."""
    if value is None:
        return "(not set)"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def render_preflight_html(report, template=None):
    """The preflight fleet report as one self-contained HTML page: the summary and the gate's decision, failures
    grouped by check, one fleet memory chart, the host table, the check x host grid and the build processes."""
    rows = _report.table_rows(report)
    total = report["summary"]["total"]
    return render(PREFLIGHT_TEMPLATE, template, signature=PREFLIGHT_SIGNATURE, report=report,
                  summary=report["summary"], gate=report.get("gate") or None, run_line=_report.run_line(report),
                  columns=_report.COLUMNS, header=rows[0],
                  table=[dict(status=report["hosts"][name]["status"], cells=row) for name, row in zip(sorted(report["hosts"]), rows[1:])],
                  groups=_report.failure_groups(report), grid=_report.grid(report),
                  chart=fleet_memory_chart(report), processes=_report.process_rows(report),
                  policy=policy_items(report.get("policy")), open_tables=total <= OPEN_UP_TO,
                  messages_shown=MESSAGES_SHOWN)
