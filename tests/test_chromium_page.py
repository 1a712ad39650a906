"""The page in Debian's headless Chromium (issue 17, Must show "A headless-Chromium test of the
list filters and the fleet page, with a screenshot in docs").

A real ``faultline sink`` process (private broker, token configured) owns and serves a chDB
store holding ``tests/test_page.page_data``'s incidents, alerts and findings. Chromium
(``/usr/bin/chromium`` driven over CDP by Playwright) uses the list's form the way a person
does (choose, type, press "apply") and each filter must list exactly the incidents the
records say, and fewer than all of them; the auto-refreshing list and fleet pages must show
an incident and an alert produced to Kafka while they are open, with no navigation by the
test. ``FAULTLINE_PAGE_SHOTS=docs/img`` keeps the screenshots (docs/page.md shows them)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest

from faultline.schemas import encode
from faultline.schemas.outputs import Alert
from faultline.sinks.store import open_store
from tests.test_page import expected, filters_to_try, listed, page_data, write_page_data

CHROMIUM = "/usr/bin/chromium"
TOKEN = "page-token-7c2e-42"   # ASCII: urllib sends header values as latin-1
AUTH = {"Authorization": f"Bearer {TOKEN}"}
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed "
                                "(infra/peers/install.sh installs it)")


def get(url: str, headers: dict | None = None, timeout: float = 10) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_up(url: str, sink, timeout: float = 180) -> float:
    """Seconds until ``url`` answered 200 (a loaded 2-core box takes a minute or more)."""
    t0 = time.monotonic()
    last: object = None
    while time.monotonic() - t0 < timeout:
        try:
            last = get(url, AUTH, timeout=5)
            if last[0] == 200:
                return time.monotonic() - t0
        except OSError as e:
            last = e
        assert sink.alive(), "the sink exited:\n" + sink.log()
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in {timeout} s (last: {last!r:.300}):\n{sink.log()}")


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    from faultline.config import Settings
    from faultline.streams.faust_harness import SinkProcess
    from tests.conftest import free_port

    d = tmp_path_factory.mktemp("chromium")
    settings = Settings(kafka_bootstrap=kafka_bootstrap, topic_prefix=f"pg{os.getpid()}.",
                        store_path=str(d / "store"), spool_dir=str(d / "spool"))
    data = page_data(int(time.time() * 1000))
    store = open_store(path=settings.store_path)
    write_page_data(store, data)
    store.close()   # the sink owns it from here
    port = free_port()
    with SinkProcess(settings, d / "sink", app_id=f"page-{os.getpid()}", web_port=port,
                     env={"FAULTLINE_API_TOKEN": TOKEN}) as sink:
        base = f"http://127.0.0.1:{port}"
        print(f"sink page up in {wait_up(base + '/incidents', sink):.1f} s")
        yield {"base": base, "data": data, "settings": settings, "sink": sink, "shots": d}
    from tests.conftest import _delete_prefixed, _run_async

    try:
        _run_async(_delete_prefixed(kafka_bootstrap, settings.topic_prefix))
    except Exception:  # best effort, as the settings fixture does
        pass


def test_every_page_route_needs_the_token(served):
    base, data = served["base"], served["data"]
    one = listed(data)[0]["id"]
    for path in ("/incidents", f"/incidents/{one}", "/fleet", "/history?node=n07", "/incidents?category=x"):
        status, body = get(base + path)
        assert status == 401 and b"bearer token" in body, (path, status)
        status, _ = get(base + path, {"Authorization": "Bearer wrong"})
        assert status == 401, path
    for path in ("/incidents", f"/incidents/{one}", "/fleet", "/history?node=n07"):
        assert get(base + path, AUTH)[0] == 200, path
    assert get(base + "/incidents?category=nope", AUTH)[0] == 400


def rows(page) -> list[str]:
    return page.eval_on_selector_all("#incidents tr.incident", "rs => rs.map(r => r.dataset.id)")


def produce(settings, topic: str, record) -> None:
    from faultline.streams.faust_harness import produce as send

    # in a thread of its own: Playwright's sync API runs an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, send(settings, [], raw=[(topic, record.id.encode(), encode(record))])).result(60)


def test_list_filters_sort_refresh_and_fleet_in_chromium(served):
    from playwright.sync_api import sync_playwright

    base, data, settings = served["base"], served["data"], served["settings"]
    every = expected(data)
    shots = served["shots"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 900}, extra_http_headers=AUTH)
            page = ctx.new_page()
            page.goto(base + "/incidents")
            assert set(rows(page)) == every
            # each filter through the form: choose / type, press apply; exactly what it names
            for query, want in filters_to_try(data):
                page.goto(base + "/incidents")
                for name, value in query.items():
                    el = f"#f-{name}"
                    if page.eval_on_selector(el, "e => e.tagName") == "SELECT":
                        page.select_option(el, value)
                    else:
                        page.fill(el, value)
                with page.expect_navigation():
                    page.click("#f-apply")
                should = expected(data, **want)
                got = rows(page)
                assert should and should < every, query
                assert set(got) == should and len(got) == len(should), (query, page.url)
                for name, value in query.items():   # the form shows the filter it applied
                    assert page.input_value(f"#f-{name}") == value, name
                if query == {"category": "gpu_hardware"}:
                    page.screenshot(path=str(shots / "page-list.png"), full_page=True)
            # sort: the lost GPU-h header, largest first
            page.goto(base + "/incidents")
            with page.expect_navigation():
                page.click("#incidents th >> text=lost GPU-h")
            lost = page.eval_on_selector_all("#incidents tr.incident", "rs => rs.map(r => +r.dataset.lost)")
            assert lost == sorted(lost, reverse=True) and lost[0] > lost[-1] and "sort=lost_gpu_hours" in page.url
            # auto-refresh: an incident produced while the filtered list is open appears on its own
            page.goto(base + "/incidents?category=gpu_hardware&refresh=2")
            before = set(rows(page))
            old = data["incidents"][0]
            new = msgspec.structs.replace(old, id="inc-live-1", job="livejob", revision=1,
                                          failure_ts=int(time.time() * 1000),
                                          root_cause=msgspec.structs.replace(old.root_cause, category="gpu_hardware"))
            produce(settings, "fl.incidents", new)
            page.wait_for_selector("tr.incident[data-id='inc-live-1']", timeout=30_000)
            assert set(rows(page)) == before | {"inc-live-1"}
            # the fleet page: live alerts grouped, the stale one left out, latest finding per subject
            g, port = data["ds"].offender_gpu, data["ds"].flaky_port
            page.goto(base + "/fleet?refresh=2")
            alerts = page.eval_on_selector_all(
                "#alerts tr.alert", "rs => rs.map(r => [r.dataset.detector, r.dataset.subject, "
                "r.querySelector('.count').textContent])")
            assert sorted(alerts) == sorted([["xid", f"gpu:{g}", "\u00d73"], ["link_flap", f"port:{port}", "\u00d71"]])
            found = page.eval_on_selector_all("#findings tr.finding", "rs => rs.map(r => r.dataset.id)")
            assert found == ["f-gpu-1", "f-port"]
            assert "<script>" not in page.content() and "&lt;script&gt;" in page.content()
            live = Alert(id="al-live-2", ts=int(time.time() * 1000), severity="critical", detector="mount_stale",
                         summary="/ckpt stale on n05", node="n05", subject="node:n05")
            produce(settings, "fl.alerts", live)
            page.wait_for_selector("#alerts tr.alert[data-detector='mount_stale']", timeout=30_000)
            page.screenshot(path=str(shots / "page-fleet.png"), full_page=True)
            # a subject links to its history
            with page.expect_navigation():
                page.click(f"#alerts a.subject[href='/history?gpu={g.replace('/', '%2F')}']")
            assert page.get_attribute("#subject", "data-name") == g
            want = {i["id"] for i in listed(data) if g in i["affected"]["gpus"]}
            want |= {new.id} if g in new.affected.gpus else set()
            assert want and set(page.eval_on_selector_all("#incidents tr.incident", "rs => rs.map(r => r.dataset.id)")) \
                == want
            # the incident page: legend and grouped evidence as Chromium shows them
            page.goto(base + f"/incidents/{listed(data)[0]['id']}")
            assert "last checkpoint" in page.inner_text("#legend")
            assert page.locator("#evidence tr[data-n='35']").count() == 1
            page.screenshot(path=str(shots / "page-incident.png"), full_page=True)
        finally:
            browser.close()
    keep = os.environ.get("FAULTLINE_PAGE_SHOTS")
    for name in ("page-list.png", "page-fleet.png", "page-incident.png"):
        png = (shots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, name
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shots / name, Path(keep) / name)
