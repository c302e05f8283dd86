"""The dashboard in a real browser (headless Debian Chromium) against a real
`sluice serve --demo`, its network fenced to loopback."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.service import start_server
from tests.web.conftest import ADMIN_TOKEN, VIEWER_TOKEN, Fleet, Tab, open_tab

pytestmark = pytest.mark.slow


def _caps(queue: dict[str, Any]) -> list[tuple[str, str]]:
    """(cap, "used / cap") per cap, spelled as GET /queues spells them (the CLI's rows)."""
    rows = [
        (resource, f"{queue['in_flight_resources'].get(resource, '0')} / {cap}")
        for resource, cap in queue["max_resources"].items()
    ]
    charges = queue["accelerator_charges"]
    if queue["max_gpus"] is not None:
        rows.append(("gpu (untyped)", f"{charges.get('gpu', 0)} / {queue['max_gpus']}"))
    rows += [
        (device, f"{charges.get(device, 0)} / {cap}")
        for device, cap in queue["max_accelerators"].items()
    ]
    return rows


_FLEET_ON_PAGE = """() => {
  const rows = {};
  for (const row of document.querySelectorAll('#fleet tbody tr')) {
    rows[row.dataset.queue] = [...row.querySelectorAll('.cap')].map(
      (cap) => [cap.dataset.resource, cap.querySelector('.cap-numbers').textContent]);
  }
  return {asOf: document.querySelector('#fleet').dataset.asOf, rows};
}"""


def _page_and_api_at_one_tick(page: Page, fleet: Fleet) -> tuple[dict[str, Any], list[Any]]:
    """The fleet table and GET /queues as of the same tick (the demo ticks every 0.5 s)."""
    with fleet.api() as api:
        for _ in range(100):
            shown = page.evaluate(_FLEET_ON_PAGE)
            queues = api.get("/queues").json()
            as_of = next((queue["as_of"] for queue in queues if queue["as_of"]), "")
            if shown["asOf"] and shown["asOf"] == as_of:
                return shown, queues
            time.sleep(0.1)
    raise AssertionError("the page never showed the tick GET /queues showed")


def _fenced(tab: Tab) -> None:
    """Issue: "the page works with the network to anywhere but loopback blocked" """
    assert tab.outside == [], f"requests beyond loopback: {tab.outside}"


def test_fleet_bars_match_get_queues(browser: Browser, fleet: Fleet) -> None:
    """Issue: "the fleet table lists the demo's queues with bars whose numbers match
    `GET /queues`" """
    tab = open_tab(browser, ADMIN_TOKEN)
    tab.page.goto(fleet.url + "/")
    expect(tab.page.locator("#live")).to_have_text("live")
    shown, queues = _page_and_api_at_one_tick(tab.page, fleet)
    assert set(shown["rows"]) == {queue["name"] for queue in queues}
    assert {"research", "inference-eval", "gang-train", "default"} <= set(shown["rows"])
    for queue in queues:
        assert [tuple(cap) for cap in shown["rows"][queue["name"]]] == _caps(queue), queue["name"]
    tab.page.select_option("#pool-filter", "gpu-pool")
    rows = tab.page.locator("#fleet tbody tr")
    names = rows.evaluate_all("rows => rows.map(row => row.dataset.queue)")
    assert names == sorted(q["name"] for q in queues if q["pool"] == "gpu-pool")
    tab.page.select_option("#pool-filter", "")
    tab.page.screenshot(path=fleet.artifacts / "fleet.png", full_page=True)
    _fenced(tab)


def test_a_blocked_queue_shows_its_badge_and_explanation(browser: Browser, fleet: Fleet) -> None:
    """Issue: "a blocked queue shows its badge and explanation" (the demo's strict_fifo
    gang-train queue blocks on its 3 x 8 H100 gangs)."""
    tab = open_tab(browser, ADMIN_TOKEN)
    page = tab.page
    page.goto(fleet.url + "/")
    badge = page.locator('#fleet tr[data-queue="gang-train"] .badge.blocked')
    expect(badge).to_contain_text("BLOCKED", timeout=60_000)
    expect(badge).to_contain_text("behind")
    page.click('#fleet tr[data-queue="gang-train"] a')
    page.wait_for_url("**/ui/queues/gang-train")
    expect(page.locator("#banner .summary")).to_contain_text("HEAD OF LINE BLOCKED", timeout=60_000)
    expect(page.locator("#banner .why li").first).not_to_be_empty(timeout=30_000)
    expect(page.locator("#line tbody tr[data-action]").first).to_be_visible()
    page.screenshot(path=fleet.artifacts / "queue.png", full_page=True)
    running = page.locator("#running tbody tr[data-action] a").first
    expect(running).to_be_visible(timeout=60_000)
    running.click()
    page.wait_for_url("**/ui/actions/**")
    expect(page.locator("#containers tbody tr").first).to_be_visible()
    expect(page.locator("#explanation p").first).not_to_be_empty()
    page.screenshot(path=fleet.artifacts / "action.png", full_page=True)
    _fenced(tab)


def test_a_cap_change_shows_up_without_a_reload(browser: Browser, fleet: Fleet) -> None:
    """Issue: "a cap change made through the API shows up without a reload" """
    tab = open_tab(browser, ADMIN_TOKEN)
    page = tab.page
    page.goto(fleet.url + "/")
    cpu = page.locator('#fleet tr[data-queue="research"] .cap[data-resource="cpu"] .cap-numbers')
    expect(cpu).to_contain_text("/ 512")
    page.evaluate("window.loadedOnce = true")
    with fleet.api() as api:
        caps = api.get("/queues/research").json()["max_resources"]
        assert api.patch("/queues/research", json={"max_resources": {**caps, "cpu": "777"}})
        try:
            expect(cpu).to_contain_text("/ 777", timeout=10_000)
            assert page.evaluate("window.loadedOnce") is True  # the same page, not reloaded
        finally:
            api.patch("/queues/research", json={"max_resources": caps}).raise_for_status()
    _fenced(tab)


def test_a_viewer_sees_no_admin_controls_and_an_admin_drains(
    browser: Browser, fleet: Fleet
) -> None:
    """Issue: "a viewer token sees no admin buttons"; "Admins can drain/undrain a queue and
    switch its policy from the page, with a confirmation." """
    viewer = open_tab(browser, VIEWER_TOKEN)
    viewer.page.goto(fleet.url + "/ui/queues/inference-eval")
    expect(viewer.page.locator("#who")).to_have_text("watcher · viewer")
    expect(viewer.page.locator("#settings dt").first).to_be_visible()
    expect(viewer.page.locator("#admin")).to_be_hidden()
    assert viewer.page.locator("main button:visible, main select#policy:visible").count() == 0
    _fenced(viewer)

    admin = open_tab(browser, ADMIN_TOKEN)
    page = admin.page
    page.goto(fleet.url + "/ui/queues/inference-eval")
    drain = page.locator("#drain")
    expect(drain).to_have_text("Drain")
    drain.click()
    expect(page.locator("#confirm-text")).to_contain_text("drain queue inference-eval?")
    page.click("#confirm-ok")
    expect(drain).to_have_text("Undrain")
    with fleet.api() as api:
        assert api.get("/queues/inference-eval").json()["draining"] is True
        drain.click()
        page.click("#confirm-ok")
        expect(drain).to_have_text("Drain")
        assert api.get("/queues/inference-eval").json()["draining"] is False
        page.select_option("#policy", "strict_fifo")
        page.click("#confirm [value=cancel]")  # a cancelled switch changes nothing
        expect(page.locator("#policy")).to_have_value("greedy_capacity")
        assert api.get("/queues/inference-eval").json()["scheduling"] == "greedy_capacity"
    _fenced(admin)


def test_the_token_is_asked_once_and_never_put_in_a_url(browser: Browser, fleet: Fleet) -> None:
    """Issue: "a token entered once (kept in the browser's session storage)"; the brief: the
    long-lived token is sent as a Bearer header, never in a URL."""
    tab = open_tab(browser, None)
    page = tab.page
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.goto(fleet.url + "/")
    expect(page.locator("#sign-in")).to_be_visible()
    assert page.locator("#fleet tbody tr").count() == 0
    page.fill("#token", ADMIN_TOKEN)
    page.click("#sign-in button[type=submit]")
    expect(page.locator("#fleet tbody tr").first).to_be_visible()
    expect(page.locator("#sign-in")).to_be_hidden()
    page.click("text=Clusters")  # another page of the same tab: no second prompt
    expect(page.locator("#pools .pool").first).to_be_visible()
    expect(page.locator("#sign-in")).to_be_hidden()
    page.screenshot(path=fleet.artifacts / "clusters.png", full_page=True)
    page.click("text=Quota shares")
    expect(page.locator("#job-queues tr[data-share]").first).to_be_visible()
    page.screenshot(path=fleet.artifacts / "shares.png", full_page=True)
    assert urls and not [url for url in urls if ADMIN_TOKEN in url]
    _fenced(tab)


def test_the_stale_indicator_shows_and_the_stream_reconnects(
    browser: Browser, tmp_path: Path
) -> None:
    """Issue: "a stale indicator when the stream drops, and it reconnects." A server of its
    own (open, no demo), killed (a graceful stop would wait on the open stream) and started
    again on the same port and database."""
    first = start_server(tmp_path / "sluice.db", period_s=0.5)
    port = urlsplit(first.url).port
    tab = open_tab(browser, None)
    page = tab.page
    try:
        page.goto(first.url + "/")
        live = page.locator("#live")
        expect(live).to_have_text("live")
        first.kill9()
        expect(live).to_contain_text("stale", timeout=30_000)
        second = start_server(tmp_path / "sluice.db", period_s=0.5, port=port)
        try:
            expect(live).to_have_text("live", timeout=30_000)
            expect(page.locator('#fleet tr[data-queue="default"]')).to_be_visible()
        finally:
            second.stop()
    finally:
        first.stop()
    _fenced(tab)


def test_the_api_docs_render_from_local_files(browser: Browser, fleet: Fleet) -> None:
    """Issue: "Self-contained: every asset served by Sluice itself (no CDN), including the API
    docs page" """
    tab = open_tab(browser, None)
    tab.page.goto(fleet.url + "/docs")
    expect(tab.page.locator(".swagger-ui .info .title")).to_contain_text("Sluice")
    tab.page.screenshot(path=fleet.artifacts / "docs.png")
    tab.page.goto(fleet.url + "/redoc")
    expect(tab.page.locator("h1").first).to_contain_text("Sluice", timeout=30_000)
    _fenced(tab)


def test_an_explanation_lists_unproven_and_ruled_out_changes_apart_from_fixes(
    browser: Browser, fleet: Fleet
) -> None:
    """Issue 18: "An explanation that cannot finish its proof in its budget says which
    suggestions are unproven, rather than presenting them as fixes." The action page shows
    them, and the changes tried that are no fix, under headings of their own (the
    explanation is the action's own, with one of each added on its way to the page)."""
    tab = open_tab(browser, ADMIN_TOKEN)
    page = tab.page
    with fleet.api() as api:
        for _ in range(100):
            running = api.get("/actions", params={"state": "running", "limit": 1}).json()
            if running:
                break
            time.sleep(0.1)
        action = running[0]["id"]
        why = api.get(f"/actions/{action}/explanation").json()
    unproven = (
        "add a node pool t4-2 like pool east/t4 to cluster west: it would be feasible, but the"
        " tick re-run with it did not finish within the explanation's budget"
    )
    ruled_out = (
        "raise max_gpus of queue q to 4 (the most of it tried): the tick re-run with it still"
        " does not run it"
    )
    why["unproven"] = [{"changes": [], "message": unproven, "also_runs": []}]
    why["ruled_out"] = [ruled_out]
    page.route("**/explanation", lambda route: route.fulfill(json=why))
    page.goto(f"{fleet.url}/ui/actions/{action}")
    box = page.locator("#explanation")
    expect(box).to_contain_text("Not proven in time:", timeout=30_000)
    expect(box).to_contain_text(unproven)
    expect(box).to_contain_text("Tried, and not a fix:")
    expect(box).to_contain_text(ruled_out)
    expect(box).not_to_contain_text("What would let it run:")
    _fenced(tab)
