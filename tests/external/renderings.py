"""The ranking rule checked on one incident and every rendering of it (docs/diagnosis.md): the
hypotheses never rise in confidence down the list, the root cause is the first with the highest
confidence, and the incident JSON header, the hypotheses table, ``faultline diagnose``'s report,
``faultline explain``'s text and the incident page all show that same number.

``problems(incident) -> list[str]`` is empty when all of that holds."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import msgspec
import orjson

from faultline.commands import diagnose as diagnose_cmd
from faultline.commands import explain as explain_cmd
from faultline.schemas.codec import encode
from faultline.streams.web import render_incident


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _flat(text: str) -> str:
    """A terminal rendering as one line: panel borders dropped, wrapped lines joined."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _ranking(inc) -> list[str]:
    rc, hyps = inc.root_cause, inc.hypotheses
    out = []
    confs = [h.confidence for h in hyps]
    if confs != sorted(confs, reverse=True):
        out.append(f"hypotheses not sorted by confidence: {confs}")
    if hyps:
        top = hyps[0]
        if (top.category, top.component, top.confidence) != (rc.category, rc.component, rc.confidence):
            out.append(f"root cause {rc.category}/{rc.component} {rc.confidence} is not the first hypothesis "
                       f"{top.category}/{top.component} {top.confidence}")
        if max(confs) != rc.confidence:
            out.append(f"an alternative shows {max(confs)} > the root cause's {rc.confidence}")
    return out


def _json(inc) -> list[str]:
    d = orjson.loads(encode(inc))
    rc = d["root_cause"]
    if d["hypotheses"] and d["hypotheses"][0]["confidence"] != rc["confidence"]:
        return [f"JSON: header {rc['confidence']} != table {d['hypotheses'][0]['confidence']}"]
    if rc["confidence"] != inc.root_cause.confidence:
        return [f"JSON: header {rc['confidence']} != {inc.root_cause.confidence}"]
    return []


def _diagnose_report(inc) -> list[str]:
    eng = SimpleNamespace(incidents=lambda: [inc],
                          stats=SimpleNamespace(events=0, signals=0, alerts=0, invalid=0, duplicates=0))
    buf = io.StringIO()
    diagnose_cmd._report(eng, buf)
    text = buf.getvalue()
    rc = inc.root_cause
    out = []
    row = re.search(rf"{re.escape(rc.category)}\s+{re.escape(rc.component[:20])}\S*\s+([0-9.]+)\s", text)
    if not row or float(row.group(1)) != rc.confidence:
        out.append(f"diagnose table: {row.group(1) if row else 'no row'} != {rc.confidence}")
    head = re.search(r"root cause\s+(\S+) @ (\S+) \((\d+)%\)", _flat(text))
    if not head or (head.group(1), head.group(2), head.group(3) + "%") != (rc.category, rc.component, _pct(rc.confidence)):
        out.append(f"diagnose text: {head.group(0) if head else 'no root cause line'} != {rc.component} {_pct(rc.confidence)}")
    alts = [m.group(1) for m in re.finditer(r" alt \S+ @ \S+ \((\d+)%\)", _flat(text))]
    if alts != [_pct(h.confidence)[:-1] for h in inc.hypotheses[1:4]]:
        out.append(f"diagnose alternatives {alts} != {[h.confidence for h in inc.hypotheses[1:4]]}")
    return out


def _explain(inc) -> list[str]:
    buf = io.StringIO()
    explain_cmd.render(inc, [], out=buf)
    text = _flat(buf.getvalue())
    rc = inc.root_cause
    out = []
    said = re.search(r"\(confidence (\d+)%\)", text)
    if not said or said.group(1) + "%" != _pct(rc.confidence):
        out.append(f"explain sentence: {said.group(0) if said else 'no confidence'} != {_pct(rc.confidence)}")
    head = re.search(r"root cause\s+\S+ @ (\S+) \((\d+)%\)", text)
    if not head or (head.group(1), head.group(2) + "%") != (rc.component, _pct(rc.confidence)):
        out.append(f"explain root cause line: {head.group(0) if head else 'none'} != {rc.component} {_pct(rc.confidence)}")
    return out


def _page(inc) -> list[str]:
    page = render_incident(orjson.loads(encode(inc)))
    rc = inc.root_cause
    out = []
    head = re.search(r'id="culprit">([^<]*)</b> \((\d+)%\)', page)
    if not head or head.group(2) + "%" != _pct(rc.confidence):
        out.append(f"page header: {head.group(0) if head else 'none'} != {_pct(rc.confidence)}")
    if inc.hypotheses:
        table = page[page.index("<h2>Hypotheses</h2>"):].split("</table>")[0]
        shown = re.findall(r"<td>(\d+)%</td>", table)
        want = [_pct(h.confidence)[:-1] for h in inc.hypotheses]
        if shown != want:
            out.append(f"page hypotheses table {shown} != {want}")
    return out


def problems(inc) -> list[str]:
    """What breaks the ranking rule or the one-number rule on ``inc`` (empty when nothing)."""
    out = _ranking(inc) + _json(inc)
    # the terminal renderings print the confidences from the causes alone: drawn without the
    # evidence timeline (most of their cost), they show the same numbers
    lean = msgspec.structs.replace(inc, evidence=[])
    for check in (_diagnose_report, _explain):
        out += check(lean)
    out += _page(inc)
    return [f"{inc.job}/{inc.attempt}: {p}" for p in out]
