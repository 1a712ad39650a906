"""``FindingsRunner``: an engine (``streams.engine.Engine`` offline, ``StreamClock`` in the
Faust agent) and a ``FindingsTracker`` in one deterministic step."""

from __future__ import annotations

from typing import Any, Iterable

from ...schemas.outputs import Alert, Finding, Incident
from .common import HOUR_MS, to_alert
from .tracker import FindingsTracker


class FindingsRunner:
    """``Engine`` + ``FindingsTracker`` in one deterministic step (``faultline ingest``,
    ``faultline findings --from``, tests): ``process(batch)`` returns the engine's alerts
    and incidents followed by the findings (and their alerts) that became due.

    The tracker sees events in ``(ts, id)`` order up to the engine's watermark, and the
    repeat-offender/change tests run at every ``step_ms`` boundary of event time once the
    watermark has passed it by ``settle_ms`` (so the incidents of failures before the
    boundary are in), which makes the findings independent of batch boundaries.
    """

    def __init__(self, engine: Any = None, tracker: FindingsTracker | None = None, *,
                 step_ms: int = HOUR_MS, settle_ms: int | None = None) -> None:
        if engine is None:
            from ..engine import Engine

            engine = Engine()
        self.engine = engine
        self.tracker = tracker or FindingsTracker()
        self.step_ms = step_ms
        if settle_ms is None:
            ccfg = getattr(getattr(engine, "cfg", None), "correlate", None)
            settle_ms = 2 * int(getattr(ccfg, "settle_ms", 60_000))
        self.settle_ms = settle_ms
        self._buf: list[tuple[int, str, Any]] = []
        self._next: int | None = None
        self._done = -(1 << 62)                 # last evaluated boundary
        self.findings: dict[str, Finding] = {}  # latest emission per id

    def process(self, batch: Iterable[Any], outputs: Iterable[Any] = ()) -> list[Any]:
        """Events (bytes, dicts or decoded structs) in; alerts, incidents, findings out.
        ``outputs``: incidents/alerts produced elsewhere (the Faust agent reads them from
        ``fl.incidents``/``fl.alerts``); they are counted but not returned."""
        import orjson

        from ...schemas.codec import ContractError, decode, now_ms

        now = now_ms()
        evs = []
        tracked = self._buf
        for item in batch:
            ev = item
            if isinstance(item, (bytes, bytearray, str)):
                # the engine decodes (and counts, and reports) every record itself; the
                # tracker's few kinds are decoded once more here, by a cheap text test first
                raw = item.encode() if isinstance(item, str) else item
                if b'"sched.job"' in raw or b'"inventory.' in raw:
                    try:
                        ev = decode(raw, now=now)
                    except ContractError:
                        ev = None
                    if ev is not None and ev.kind in _TRACKED_KINDS:
                        tracked.append((ev.ts, ev.id, ev))
                evs.append(item)
                continue
            if isinstance(item, dict):
                try:
                    ev = decode(orjson.dumps(item), now=now)
                except (ContractError, TypeError):
                    ev = item  # the engine counts and reports it
            if getattr(ev, "kind", None) in _TRACKED_KINDS:
                tracked.append((ev.ts, ev.id, ev))
            evs.append(ev)
        out = self.engine.process(evs)
        extra = list(outputs)
        if extra and hasattr(self.engine, "outputs_seen"):
            self.engine.outputs_seen(extra)
        res = self._after(extra + out, self.engine.watermark)
        return res[len(extra):] if extra else res

    def advance(self, watermark_ms: int) -> list[Any]:
        return self._after(self.engine.advance(watermark_ms), watermark_ms)

    def finish(self) -> list[Any]:
        """End of input: close the engine, feed everything, evaluate once more at the end."""
        out = self.engine.finish()
        last = max([t for t, _, _ in self._buf] + [self.tracker.now])
        res = self._after(out, 1 << 62, final=last)
        return res

    def _after(self, out: list[Any], wm: int, final: int | None = None) -> list[Any]:
        tr = self.tracker
        res = list(out)
        late = False
        for o in out:
            if isinstance(o, Incident):
                tr.on_incident(o)
                late = late or o.failure_ts < self._done
            elif isinstance(o, Alert):
                tr.on_alert(o)
                late = late or o.ts < self._done
        self._buf.sort(key=lambda x: (x[0], x[1]))
        limit = wm if final is None else (1 << 62)
        if self._next is None and self._buf:
            self._next = (self._buf[0][0] // self.step_ms + 1) * self.step_ms
        i = 0
        buf = self._buf
        while True:
            # feed events up to the next boundary (or the watermark), evaluating boundaries on the way
            nb = self._next
            while i < len(buf) and buf[i][0] <= limit and (nb is None or buf[i][0] < nb):
                res.extend(self._emit(tr.observe(buf[i][2])))
                i += 1
            if nb is not None and nb + self.settle_ms <= limit and (final is None or nb <= final):
                res.extend(self._emit(*tr.evaluate_with_alerts(nb)))
                self._done = nb
                late = False
                self._next = nb + self.step_ms
                continue
            break
        del buf[:i]
        if late and final is None:
            # incidents/alerts from before the last evaluated boundary arrived after it (the
            # stream's correlation lags in wall-clock time): re-test at that boundary now
            # rather than waiting for event time to reach the next one
            res.extend(self._emit(*tr.evaluate_with_alerts(self._done)))
        if final is not None:
            res.extend(self._emit(*tr.evaluate_with_alerts(max(final, tr.now))))
        return res

    def _emit(self, found: list[Finding], alerts: list[Alert] | None = None) -> list[Any]:
        out: list[Any] = []
        for f in found:
            self.findings[f.id] = f
            out.append(f)
            if f.kind == "version_drift":
                out.append(to_alert(f))
        out.extend(alerts or ())
        return out


class StreamClock:
    """Engine stand-in for the Faust agent, where detectors and correlation run in other
    agents: no outputs of its own; the watermark is the highest event time seen (events and
    the failure times of incidents) minus the lateness bound."""

    def __init__(self, lateness_ms: int = 10_000) -> None:
        self.lateness_ms = lateness_ms
        self.max_ts = -(1 << 62)
        self.cfg = None

    def process(self, evs: list[Any]) -> list[Any]:
        for ev in evs:
            ts = getattr(ev, "ts", None)
            if isinstance(ts, int) and ts > self.max_ts:
                self.max_ts = ts
        return []

    def outputs_seen(self, outs: list[Any]) -> None:
        for o in outs:
            ts = o.failure_ts if isinstance(o, Incident) else getattr(o, "ts", None)
            if isinstance(ts, int) and ts > self.max_ts:
                self.max_ts = ts

    @property
    def watermark(self) -> int:
        return self.max_ts - self.lateness_ms

    def advance(self, watermark_ms: int) -> list[Any]:
        self.max_ts = max(self.max_ts, watermark_ms + self.lateness_ms)
        return []

    def finish(self) -> list[Any]:
        return []


_TRACKED_KINDS = frozenset({"sched.job", "inventory.versions", "inventory.topology", "inventory.change"})
