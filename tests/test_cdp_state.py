"""What a CDP client sets for the persona ends with it (cdp/permissions.py,
and the table "What a script may change" in docs/guides/BRING_YOUR_OWN_SCRIPT.md),
against a real worker and its real Chromium: a raw client drives the leased
page `main`, and the worker's page `feed`, which the client never sees, is
asked through the API what it sees, before, during and after the connection."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from harness.worker import WorkerProcess, wait_until
from tests.support.cdp_client import RawCdp
from tests.support.site import Site

GEOLOCATION_STATE = "navigator.permissions.query({name: 'geolocation'})"
GEOLOCATION = f"{GEOLOCATION_STATE}.then(p => p.state)"
# A page whose clock is paused or that is frozen never answers this.
TIME_MOVES = "new Promise(r => setTimeout(() => r('moves'), 10))"
NOTIFICATIONS = "navigator.permissions.query({name: 'notifications'}).then(p => p.state)"


def token_url(worker: WorkerProcess, api: httpx.Client, lease: str, page: str = "main") -> str:
    made = api.post(f"/{page}/cdp", json={}, headers={"X-Lease": lease})
    assert made.status_code == 201, made.text
    return worker.base_url.replace("http://", "ws://") + made.json()["url"]


def error_of(answer: dict) -> str:
    assert "error" in answer, answer
    return answer["error"]["message"]


@pytest.fixture
def pages(worker: WorkerProcess, api: httpx.Client, site: Site) -> Iterator[str]:
    """`main`, leased (its lease is yielded), and `feed`, the worker's, both on the site's origin."""
    assert api.post("/pages", json={"page_id": "feed"}).status_code == 201
    lease = api.post("/main/lease", json={"ttl": 120}).json()["lease"]
    try:
        for page, headers in (("main", {"X-Lease": lease}), ("feed", {})):
            gone = api.post(f"/{page}/primitive/goto", json={"url": f"{site.url}/list?page=1&pages=2"}, headers=headers)
            assert gone.status_code == 200, gone.text
        yield lease
    finally:
        api.delete("/main/lease", headers={"X-Lease": lease})
        api.delete("/feed")


def on_feed(api: httpx.Client, expression: str) -> object:
    answer = api.post("/feed/primitive/evaluate", json={"expression": expression})
    assert answer.status_code == 200, answer.text
    return answer.json()["value"]


def on_main(api: httpx.Client, lease: str, expression: str) -> object:
    answer = api.post("/main/primitive/evaluate", json={"expression": expression}, headers={"X-Lease": lease})
    assert answer.status_code == 200, answer.text
    return answer.json()["value"]


# Each way a client may set a permission: (the call, in a page's session or not, what it grants).
GRANTS = {
    "grantPermissions, every origin": ("Browser.grantPermissions", {"permissions": ["geolocation", "notifications"]}, False),
    "grantPermissions, the site's origin": ("Browser.grantPermissions", {"permissions": ["geolocation", "notifications"], "origin": "SITE"}, False),
    "grantPermissions, with the context's id": ("Browser.grantPermissions", {"permissions": ["geolocation", "notifications"], "browserContextId": "CONTEXT"}, False),
    "grantPermissions in a page's session": ("Browser.grantPermissions", {"permissions": ["geolocation", "notifications"]}, True),
    "setPermission": ("Browser.setPermission", {"permission": {"name": "geolocation"}, "setting": "granted"}, False),
    "setPermission in a page's session": ("Browser.setPermission", {"permission": {"name": "geolocation"}, "setting": "granted"}, True),
}


@pytest.mark.parametrize("way", GRANTS)
def test_a_permission_a_client_grants_ends_with_its_connection(worker, api, site, pages, way):
    method, params, in_session = GRANTS[way]
    assert on_feed(api, GEOLOCATION) == "prompt" and on_feed(api, NOTIFICATIONS) == "prompt"
    with RawCdp(token_url(worker, api, pages)) as client:
        session = client.page_session()
        context = client.result("Target.getBrowserContexts")["defaultBrowserContextId"]
        params = {key: {"SITE": site.url, "CONTEXT": context}.get(value, value) if isinstance(value, str) else value
                  for key, value in params.items()}
        assert client.result(method, params, session if in_session else None) == {}
        # Chromium keeps permissions per context and origin: while the client is
        # connected, the persona's other pages of the origin see them too (as the guide says).
        assert on_feed(api, GEOLOCATION) == "granted"
    # Gone when the client goes: feed, and the client's own page, ask again.
    wait_until(lambda: on_feed(api, GEOLOCATION) == "prompt", what="feed's geolocation back to prompt")
    assert on_feed(api, NOTIFICATIONS) == "prompt"
    assert on_main(api, pages, GEOLOCATION) == "prompt"


def test_a_client_s_end_or_reset_takes_only_its_own_permissions(worker, api, site, pages):
    assert api.post("/pages", json={"page_id": "second"}).status_code == 201
    second = api.post("/second/lease", json={"ttl": 120}).json()["lease"]
    try:
        with RawCdp(token_url(worker, api, second, page="second")) as other:
            # setPermission changes one permission (grantPermissions denies the origin's others).
            other.result("Browser.setPermission", {"permission": {"name": "notifications"}, "setting": "granted", "origin": site.url})
            with RawCdp(token_url(worker, api, pages)) as client:
                geolocation = {"permission": {"name": "geolocation"}, "setting": "granted", "origin": site.url}
                client.result("Browser.setPermission", geolocation)
                assert (on_feed(api, GEOLOCATION), on_feed(api, NOTIFICATIONS)) == ("granted", "granted")
                # A reset is the client's own: the other client's grant stays.
                assert client.result("Browser.resetPermissions") == {}
                assert (on_feed(api, GEOLOCATION), on_feed(api, NOTIFICATIONS)) == ("prompt", "granted")
                client.result("Browser.setPermission", geolocation)
            wait_until(lambda: on_feed(api, GEOLOCATION) == "prompt", what="the first client's grant undone")
            assert on_feed(api, NOTIFICATIONS) == "granted"  # the other client is still connected
            # A permission Chromium does not know is its error, and sets nothing to undo.
            assert "Unknown permission" in error_of(other.call("Browser.grantPermissions", {"permissions": ["no-such-thing"]}))
        wait_until(lambda: on_feed(api, NOTIFICATIONS) == "prompt", what="the second client's grant undone")
    finally:
        api.delete("/second/lease", headers={"X-Lease": second})
        api.delete("/second")


def test_a_permission_call_for_another_context_is_refused(worker, api, pages):
    with RawCdp(token_url(worker, api, pages)) as client:
        refused = client.call("Browser.grantPermissions", {"permissions": ["geolocation"], "browserContextId": "0" * 32})
        assert "Only the persona's browser context" in error_of(refused)
    assert on_feed(api, GEOLOCATION) == "prompt"


# What a client may set on its page, and how it is checked there: (method, params, expression, its value when set).
ON_THE_PAGE = {
    "timezone": ("Emulation.setTimezoneOverride", {"timezoneId": "Pacific/Auckland"},
                 "Intl.DateTimeFormat().resolvedOptions().timeZone", "Pacific/Auckland"),
    "locale": ("Emulation.setLocaleOverride", {"locale": "fr-FR"}, "Intl.DateTimeFormat().resolvedOptions().locale", "fr-FR"),
    "user agent": ("Emulation.setUserAgentOverride", {"userAgent": "agent-of-a-client"}, "navigator.userAgent", "agent-of-a-client"),
    "network user agent": ("Network.setUserAgentOverride", {"userAgent": "agent-of-a-client"},
                           "fetch('/echo').then(r => r.text()).then(t => t.includes('agent-of-a-client'))", True),
    "extra headers": ("Network.setExtraHTTPHeaders", {"headers": {"X-Client": "set-by-a-client"}},
                      "fetch('/echo').then(r => r.text()).then(t => t.includes('set-by-a-client'))", True),
    "geolocation": ("Emulation.setGeolocationOverride", {"latitude": 51.5, "longitude": -0.1, "accuracy": 1},
                    # Asked only when granted: a prompt headless Chromium dismisses would put the origin under embargo.
                    f"{GEOLOCATION_STATE}.then(p => p.state !== 'granted' ? p.state : new Promise(r => "
                    "navigator.geolocation.getCurrentPosition(p => r(p.coords.latitude), e => r(e.code), {timeout: 2000})))",
                    51.5),
    "viewport": ("Emulation.setDeviceMetricsOverride", {"width": 333, "height": 444, "deviceScaleFactor": 1, "mobile": False},
                 "innerWidth", 333),
    "dark scheme": ("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
                    "matchMedia('(prefers-color-scheme: dark)').matches", True),
    "interception": ("Fetch.enable", {"patterns": [{"urlPattern": "*/api/items*"}]},
                     "Promise.race([fetch('/api/items?count=1').then(() => 'passed'), new Promise(r => setTimeout(() => r('held'), 1000))])",
                     "held"),
}


def test_what_a_client_sets_on_its_page_stays_there_and_ends_with_it(worker, api, site, pages):
    """The table's rows "on the page": each set on main, seen there, never on feed, gone after the disconnect."""
    before = {name: on_feed(api, expression) for name, (_, _, expression, _) in ON_THE_PAGE.items()}
    with RawCdp(token_url(worker, api, pages)) as client:
        session = client.page_session()
        # The geolocation row asks for the permission, granted here by the client (undone at its end).
        client.result("Browser.grantPermissions", {"permissions": ["geolocation"], "origin": site.url})
        client.result("Network.enable", {}, session)
        for name, (method, params, expression, value) in ON_THE_PAGE.items():
            client.result(method, params, session)
            seen = client.result("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, session)
            assert seen["result"]["value"] == value, (name, seen)
        during = {name: on_feed(api, expression) for name, (_, _, expression, _) in ON_THE_PAGE.items()}
        assert not [name for name, (_, _, _, value) in ON_THE_PAGE.items() if during[name] == value], during
    wait_until(lambda: on_feed(api, GEOLOCATION) == "prompt", what="the grant undone")
    after = {name: on_main(api, pages, expression) for name, (_, _, expression, _) in ON_THE_PAGE.items()}
    assert after == before  # main as feed: nothing of the client's is left on it


@pytest.mark.parametrize(("method", "params", "in_session", "says"), [
    ("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": "/tmp"}, True, "is refused"),
    ("Browser.cancelDownload", {"guid": "0"}, False, "not offered at the browser level"),
    ("Browser.cancelDownload", {"guid": "0"}, True, "not offered to a CDP client"),
    ("Fetch.enable", {}, False, "not offered at the browser level"),
    ("Network.setExtraHTTPHeaders", {"headers": {"X-A": "b"}}, False, "not offered at the browser level"),
    ("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Tokyo"}, False, "not offered at the browser level"),
    # A handler a page registers while this holds serves every page of the persona, after the client too.
    ("Page.setRPHRegistrationMode", {"mode": "autoAccept"}, True, "protocol handler"),
    # Chromium keeps these on the page after the session is detached: the worker's page would.
    ("Emulation.setVirtualTimePolicy", {"policy": "pause"}, True, "clock paused"),
    ("Page.setWebLifecycleState", {"state": "frozen"}, True, "frozen"),
    ("Page.setFontSizes", {"fontSizes": {"standard": 30}}, True, "font sizes"),
])
def test_what_the_table_refuses_is_answered_with_the_refusal(worker, api, pages, method, params, in_session, says):
    with RawCdp(token_url(worker, api, pages)) as client:
        session = client.page_session() if in_session else None
        assert says in error_of(client.call(method, params, session)), method
        if in_session:  # never reached the page: main is as the worker left it
            page = client.result("Runtime.evaluate", {"expression": TIME_MOVES, "awaitPromise": True, "returnByValue": True}, session)
            assert page["result"]["value"] == "moves"
        # The download behaviour is answered and not applied, wherever it is sent.
        assert client.result("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": "/tmp"}, session) == {}


WIDTH = ("(() => { const s = document.createElement('span'); s.textContent = 'iiiiiiiiiiWWWW'; document.body.append(s); "
         "const w = s.getBoundingClientRect().width; s.remove(); return Math.round(w); })()")


def test_a_client_s_fonts_are_answered_and_not_applied(worker, api, pages):
    """Chromium keeps a page's fonts after the session that set them goes; Playwright's set-up sends them."""
    before = on_main(api, pages, WIDTH)
    with RawCdp(token_url(worker, api, pages)) as client:
        session = client.page_session()
        monospace = {"fontFamilies": {"standard": "DejaVu Sans Mono", "serif": "DejaVu Sans Mono", "sansSerif": "DejaVu Sans Mono"}}
        assert client.result("Page.setFontFamilies", monospace, session) == {}
        seen = client.result("Runtime.evaluate", {"expression": WIDTH, "returnByValue": True}, session)["result"]["value"]
        assert seen == before
    assert on_main(api, pages, WIDTH) == before


def test_a_client_reads_and_wipes_every_origin_s_cookies_as_the_guide_says(worker, api, site, pages):
    """Allowed for the full key, as web/cookies is: every origin's cookies, not only its page's."""
    assert api.post("/feed/primitive/goto", json={"url": f"{site.url}/set-cookie?name=feeds&value=1"}).status_code == 200
    localhost = site.url.replace("127.0.0.1", "localhost")
    assert api.post("/feed/primitive/goto", json={"url": f"{localhost}/set-cookie?name=elsewhere&value=2"}).status_code == 200
    with RawCdp(token_url(worker, api, pages)) as client:
        session = client.page_session()
        # And any origin's site data: feed's local storage, from main's session.
        assert api.post("/feed/primitive/goto", json={"url": f"{site.url}/list?page=1&pages=2"}).status_code == 200
        on_feed(api, "localStorage.setItem('kept', 'by feed'), 1")
        client.result("Storage.clearDataForOrigin", {"origin": site.url, "storageTypes": "local_storage"}, session)
        assert on_feed(api, "localStorage.getItem('kept')") is None
        every = {cookie["name"] for cookie in client.result("Network.getAllCookies", {}, session)["cookies"]}
        assert {"feeds", "elsewhere"} <= every
        assert {"feeds", "elsewhere"} <= {cookie["name"] for cookie in client.result("Storage.getCookies")["cookies"]}
        named = client.result("Network.getCookies", {"urls": [f"{localhost}/"]}, session)["cookies"]
        assert [cookie["name"] for cookie in named] == ["elsewhere"]  # another origin's, by its URL
        assert client.result("Network.clearBrowserCache", {}, session) == {}
        assert client.result("Network.clearBrowserCookies", {}, session) == {}
    listed = api.get("/feed/plugin/web/cookies").json()
    assert listed["cookies"] == [], json.dumps(listed)  # wiped for the persona: they are its data, not the client's
