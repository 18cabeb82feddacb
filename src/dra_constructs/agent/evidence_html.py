"""``dra-sanitizer evidence --html FILE``: one self-contained HTML page a reviewer can open anywhere.

One file: inline CSS, inline SVG timelines, no script, no external resource (a
``Content-Security-Policy`` of ``default-src 'none'`` says so to the browser, too). Per device:
a timeline of its cycles on one time axis shared by all devices (colour = result), and a table
of every cycle (trigger, result, claim, coverage with a bar, bytes, fill / verify bandwidth,
seconds, device nodes held by processes found through ``/proc/*/fd``, reason, warnings). Every
value from the evidence goes through :func:`html.escape`: claim names, namespaces and reasons
are tenant-influenced. CSS classes and SVG coordinates are
computed here, never taken from a record. The same evidence gives the same bytes (no clock).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from dra_constructs.agent.evidence_read import Evidence, EvidenceRow
from dra_constructs.agent.evidence_table import bandwidth, coverage, printable, size, timestamp

__all__ = ["render_html"]

_RESULT_CLASS = {"released": "ok", "quarantined": "bad", "interrupted": "warn", "deferred": "warn",
                 "operator-release": "op", "adopted": "warn"}
_COLOURS = {"ok": "#1a7f37", "bad": "#cf222e", "warn": "#bf8700", "op": "#8250df", "other": "#57606a"}
_WIDTH, _HEIGHT, _PAD = 900, 46, 12
_Y = 16
_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2328}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;white-space:nowrap}
td{overflow-wrap:break-word}td.r{white-space:nowrap}td.why{min-width:18em}
.r{font-weight:600}""" + "".join(f".{c}{{color:{v}}}" for c, v in _COLOURS.items()) + """
.bar{display:inline-block;width:80px;height:8px;background:#eaeef2;margin-right:4px}
.bar span{display:block;height:8px;background:#1a7f37}
.mono{font-family:ui-monospace,monospace;font-size:12px;white-space:nowrap}
.axis{font-size:11px;fill:#57606a}
svg{display:block;margin:4px 0}
"""


def _e(value: object) -> str:
    return html.escape(printable(None if value is None else str(value)), quote=True)


def _klass(result: str) -> str:
    return _RESULT_CLASS.get(result, "other")


def _by_device(rows: Sequence[EvidenceRow]) -> dict[str, list[EvidenceRow]]:
    groups: dict[str, list[EvidenceRow]] = {}
    for row in rows:
        groups.setdefault(row.device, []).append(row)
    return dict(sorted(groups.items()))


def _timeline(rows: Sequence[EvidenceRow], span: tuple[float, float]) -> str:
    low, high = span
    usable = _WIDTH - 2 * _PAD
    marks = []
    for index, row in enumerate(rows):
        if high > low and row.started_at > 0:
            x = _PAD + usable * (row.started_at - low) / (high - low)
        else:  # no times: by order
            x = _PAD + usable * (index + 0.5) / len(rows)
        tip = f"{timestamp(row.started_at)} {row.result}: {row.reason or row.trigger}"
        marks.append(f'<circle cx="{x:.1f}" cy="{_Y}" r="6" fill="{_COLOURS[_klass(row.result)]}">'
                     f"<title>{_e(tip)}</title></circle>")
    axis = (f'<text class="axis" x="{_PAD}" y="{_HEIGHT - 4}">{_e(timestamp(low))}</text>'
            f'<text class="axis" x="{_WIDTH - _PAD}" y="{_HEIGHT - 4}" text-anchor="end">{_e(timestamp(high))}</text>')
    return (f'<svg width="{_WIDTH}" height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
            f'class="timeline"><line x1="{_PAD}" y1="{_Y}" x2="{_WIDTH - _PAD}" y2="{_Y}" stroke="#d0d7de" '
            f'stroke-width="2"/>{"".join(marks)}{axis}</svg>')


def _coverage_cell(row: EvidenceRow) -> str:
    if not row.bytes_verified:
        return '<td class="num">-</td>'
    width = max(0.0, min(1.0, row.coverage)) * 100
    return f'<td class="num"><span class="bar"><span style="width:{width:.1f}%"></span></span>{_e(coverage(row))}</td>'


def _record_row(row: EvidenceRow) -> str:
    verified = f"{size(row.bytes_verified)} / {size(row.bytes_total)}" if row.bytes_total else "-"
    warnings = "<br>".join(_e(w) for w in row.warnings) or "-"
    held = "<br>".join(_e(h) for h in row.device_nodes) or "-"
    return (f"<tr><td class=\"num\">{_e(timestamp(row.started_at))}</td><td class=\"mono\">{_e(row.uuid)}</td>"
            f"<td>{_e(row.trigger)}</td><td class=\"r {_klass(row.result)}\">{_e(row.result)}</td>"
            f"<td>{_e(row.claim)}</td>{_coverage_cell(row)}<td class=\"num\">{_e(verified)}</td>"
            f"<td class=\"num\">{_e(bandwidth(row.fill_bytes_per_s))}</td>"
            f"<td class=\"num\">{_e(bandwidth(row.verify_bytes_per_s))}</td>"
            f"<td class=\"num\">{row.seconds:.2f}</td><td class=\"held\">{held}</td>"
            f"<td class=\"why\">{_e(row.reason)}</td><td>{warnings}</td></tr>")


def _summary_row(index: int, device: str, rows: Sequence[EvidenceRow]) -> str:
    counts = {k: sum(1 for r in rows if _klass(r.result) == k) for k in ("ok", "bad")}
    proven = [r.coverage for r in rows if r.bytes_verified]
    last = rows[-1]
    return (f'<tr><td><a href="#d{index}">{_e(device)}</a></td><td class="num">{len(rows)}</td>'
            f'<td class="num">{counts["ok"]}</td><td class="num">{counts["bad"]}</td>'
            f'<td class="r {_klass(last.result)}">{_e(last.result)}</td>'
            f'<td class="num">{_e(f"{min(proven) * 100:.2f}%" if proven else None)}</td>'
            f"<td>{_e(last.reason)}</td></tr>")


def render_html(evidence: Evidence, title: str) -> str:
    """The report page of ``evidence`` (its rows in file order)."""
    from dra_constructs import __version__

    groups = _by_device(evidence.rows)
    times = [r.started_at for r in evidence.rows if r.started_at > 0]
    span = (min(times), max(times)) if times else (0.0, 0.0)
    nodes = sorted({r.node for r in evidence.rows})
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>Node(s): {_e(', '.join(nodes) or None)}. {len(evidence.rows)} record(s), {len(groups)} device(s), "
        f"{_e(timestamp(span[0]))} to {_e(timestamp(span[1]))} (UTC). Source: <span class=\"mono\">"
        f"{_e(evidence.source)}</span>, {evidence.lines} line(s). Generated by dra-sanitizer {_e(__version__)}.</p>",
    ]
    if evidence.bad_lines:
        items = "".join(f"<li>line {n}: {_e(p)}</li>" for n, p in evidence.bad_lines)
        parts.append(f'<p class="bad">Lines skipped (not evidence records):</p><ul>{items}</ul>')
    parts.append("<table id=\"summary\"><tr><th>Device</th><th>Records</th><th>Released</th><th>Quarantined</th>"
                 "<th>Last result</th><th>Lowest coverage</th><th>Last reason</th></tr>")
    parts.extend(_summary_row(i, d, rows) for i, (d, rows) in enumerate(groups.items()))
    parts.append("</table>")
    legend = " ".join(f'<span class="r {k}">&#9679; {_e(r)}</span>' for r, k in _RESULT_CLASS.items())
    parts.append(f"<p>Timeline (one axis for all devices): {legend}</p>")
    for index, (device, rows) in enumerate(groups.items()):
        parts.append(f'<section class="device" id="d{index}"><h2>{_e(device)}</h2>{_timeline(rows, span)}')
        parts.append("<table><tr><th>Time (UTC)</th><th>UUID</th><th>Trigger</th><th>Result</th><th>Claim</th>"
                     "<th>Coverage</th><th>Verified / total</th><th>Fill</th><th>Verify</th><th>Seconds</th>"
                     "<th>Device nodes held</th><th>Reason</th><th>Warnings</th></tr>")
        parts.extend(_record_row(r) for r in rows)
        parts.append("</table></section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
