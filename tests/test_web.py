"""The incident web page: rendered by the worker (Faust web views) from the store, loaded in
Debian's headless Chromium driven by Playwright, with a screenshot."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import time
import urllib.request

import orjson
import pytest

from faultline.producers.simulate import Intervals, simulate
from faultline.streams.web import culprit_ids, render_incident, timeline_svg

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """A simulated GPU failure, ingested (diagnosed + stored) into a chDB store."""
    d = tmp_path_factory.mktemp("web")
    lines, labels = simulate("gpu-xid79", seed=11, nodes=8, hours=1.5,
                             intervals=Intervals(gpu=30, hw=120, net_port=60, net_rdma=60, storage=60))
    events = d / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    store = d / "store"
    p = subprocess.run([sys.executable, "-m", "faultline.cli", "ingest", str(events), "--store", str(store),
                        "--quiet"], capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    d_out = subprocess.run([sys.executable, "-m", "faultline.cli", "diagnose", str(events), "--json"],
                           capture_output=True, timeout=300)
    incidents = [orjson.loads(x) for x in d_out.stdout.splitlines() if x.strip()]
    assert incidents, "the scenario must yield an incident"
    return store, labels, incidents


def test_page_renders_swimlanes_and_culprit(diagnosed):
    _, labels, incidents = diagnosed
    inc = incidents[0]
    page = render_incident(inc)
    assert inc["root_cause"]["component"] in page
    svg = timeline_svg(inc)
    for layer in ("gpu", "hw", "net", "storage", "sched", "runtime", "inventory"):
        assert f">{layer}</text>" in svg
    assert svg.count("<circle") == len(inc["evidence"])
    # the culprit is highlighted: its evidence (or, when the cause lists none, its node's)
    assert 'class="ev culprit"' in svg
    if culprit_ids(inc):
        assert all(f'data-id="{i}"' in svg for i in culprit_ids(inc) if any(e["id"] == i for e in inc["evidence"]))
    assert "<script" not in page  # works without JavaScript


def _wait_http(url: str, timeout: float = 90) -> bytes:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read()
        except Exception as e:  # noqa: BLE001 - retried until the worker is up
            last = e
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in {timeout} s: {last}")


def test_sink_serves_incident_page_in_chromium(diagnosed, settings, tmp_path):
    if not shutil.which("chromium"):
        pytest.skip("Debian chromium is not installed (make peers installs it)")
    from playwright.sync_api import sync_playwright

    from faultline.streams.faust_harness import SinkProcess
    from tests.conftest import free_port

    store, labels, incidents = diagnosed
    want = incidents[0]
    settings = dataclasses.replace(settings, store_path=str(store))  # the sink owns and serves this store
    port = free_port()
    with SinkProcess(settings, tmp_path / "sink", app_id=f"web-{settings.topic_prefix}",
                     web_port=port) as w:
        try:
            _wait_http(f"http://127.0.0.1:{port}/incidents")
        except AssertionError:
            raise AssertionError("the sink's web page did not come up:\n" + w.log())
        shot = tmp_path / "incident.png"
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS[1:], headless=True)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/incidents")
                assert want["job"] in page.inner_text("table")
                page.click(f"a[href='/incidents/{want['id']}']")
                page.wait_for_selector("#root-cause")
                assert page.get_attribute("#incident", "data-id") == want["id"]
                cause = page.inner_text("#root-cause")
                assert want["root_cause"]["category"] in cause
                assert page.inner_text("#culprit") == want["root_cause"]["component"]
                assert page.locator("svg circle.culprit").count() >= 1
                assert page.locator("svg circle").count() == len(want["evidence"])
                page.screenshot(path=str(shot), full_page=True)
            finally:
                browser.close()
        png = shot.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        # keep the last screenshot for people to look at
        (tmp_path.parent / "incident-page.png").write_bytes(png)
        # unknown id -> 404 page, not a crash
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/incidents/nope", timeout=5)
            raise AssertionError("expected 404")
        except urllib.error.HTTPError as e:
            assert e.code == 404
