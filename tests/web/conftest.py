"""A real `sluice serve --demo` with an auth file, and headless Debian Chromium driven by
Playwright (never Playwright's own browser download: `.ci/run` installs the system one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from playwright import sync_api as playwright_api

from tests.support.service import Server, start_server

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
ADMIN_TOKEN = "admin-token-0123456789abcdef"
VIEWER_TOKEN = "viewer-token-0123456789abcdef"


@dataclass
class Fleet:
    server: Server
    artifacts: Path

    @property
    def url(self) -> str:
        return self.server.url

    def api(self, token: str = ADMIN_TOKEN) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    home = tmp_path_factory.mktemp("web")
    auth = home / "auth.yaml"
    auth.write_text(
        yaml.safe_dump(
            {
                "tokens": {
                    ADMIN_TOKEN: {"role": "admin", "name": "platform"},
                    VIEWER_TOKEN: {"role": "viewer", "name": "watcher"},
                }
            }
        )
    )
    auth.chmod(0o600)
    server = start_server(home / "sluice.db", period_s=0.5, extra=["--demo", "--auth", str(auth)])
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield Fleet(server, ARTIFACTS)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[playwright_api.Browser]:
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)"
        if os.environ.get("CI"):
            pytest.fail(missing)  # CI must run the browser tests, never skip them
        pytest.skip(missing)
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            # Root in CI has no user namespace for the sandbox; the page is our own.
            args=["--no-sandbox"] if os.geteuid() == 0 else [],
        )
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Tab:
    page: playwright_api.Page
    outside: list[str]


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname
    return host in ("127.0.0.1", "localhost", "::1") or url.startswith(("data:", "about:"))


def open_tab(browser: playwright_api.Browser, token: str | None) -> Tab:
    """A fresh browser context (its own session storage) holding `token`, its network
    fenced to loopback."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    outside: list[str] = []

    def fence(route: playwright_api.Route) -> None:
        if is_loopback(route.request.url):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", fence)
    if token is not None:
        context.add_init_script(f"sessionStorage.setItem('sluice.token', {token!r})")
    page = context.new_page()
    page.set_default_timeout(15_000)
    return Tab(page, outside)
