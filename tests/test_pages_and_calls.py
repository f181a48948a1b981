"""Pages, busy waiting, leases and the check order, against a real worker."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from harness.worker import wait_until


def envelope(response: httpx.Response, status: int, page_id: str | None = "main") -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"success", "error", "page_id"}, body
    assert body["success"] is False and body["page_id"] == page_id
    assert "Traceback" not in body["error"]
    return body["error"]


def page_state(api: httpx.Client, page_id: str = "main") -> dict:
    return api.get(f"/{page_id}").json()


# --- pages ---------------------------------------------------------------------


def test_main_is_open_at_start(api):
    body = api.get("/pages").json()
    assert body["success"] is True
    assert [p["page_id"] for p in body["pages"]] == ["main"]


def test_open_list_state_and_close_a_page(api):
    opened = api.post("/pages", json={"page_id": "tab-2"})
    assert opened.status_code == 201 and opened.json()["page_id"] == "tab-2"
    assert {p["page_id"] for p in api.get("/pages").json()["pages"]} == {"main", "tab-2"}
    assert envelope(api.post("/pages", json={"page_id": "tab-2"}), 409, "tab-2") == "Page tab-2 is already open."
    state = api.get("/tab-2").json()
    assert state["busy"] is False and state["job_id"] is None and state["leased"] is False
    assert api.delete("/tab-2").json() == {"success": True, "page_id": "tab-2", "closed": True}
    envelope(api.get("/tab-2"), 404, "tab-2")


def test_one_page_past_max_pages_answers_409(api):
    # The module's worker runs with MAX_PAGES=3.
    for name in ("p1", "p2"):
        assert api.post("/pages", json={"page_id": name}).status_code == 201
    try:
        message = envelope(api.post("/pages", json={"page_id": "p3"}), 409, "p3")
        assert "MAX_PAGES" in message
    finally:
        for name in ("p1", "p2"):
            api.delete(f"/{name}")


@pytest.mark.parametrize(
    "page_id", ["", "A", "-x", "_x", "x" * 33, "a.b", "a b", "../x", "é", "pages", "jobs", "media", "activity", "health"]
)
def test_invalid_page_ids_answer_400_and_open_nothing(api, page_id):
    response = api.post("/pages", json={"page_id": page_id})
    assert response.status_code == 400, response.text
    assert len(api.get("/pages").json()["pages"]) == 1


def test_main_stays_open(api):
    envelope(api.delete("/main"), 409)


# --- calls and the plugin framework ---------------------------------------------


def test_web_open_text_and_state(api, site):
    opened = api.get("/main/plugin/web/open", params={"url": site.url + "/index.html"})
    assert opened.status_code == 200, opened.text
    assert opened.json() == {
        "success": True, "page_id": "main", "url": site.url + "/index.html", "status": 200, "title": "Test home",
    }
    text = api.post("/main/plugin/web/text", json={"selector": "#heading"}).json()
    assert text["text"] == "Hello, Penelope"
    texts = api.get("/main/plugin/web/text", params={"selector": ".item", "all": "true"}).json()
    assert texts["texts"] == ["one", "two", "three"]
    envelope(api.post("/main/plugin/web/text", json={"selector": "#missing"}), 404)
    assert api.get("/main/plugin/web/state").json() == {
        "success": True, "page_id": "main", "url": site.url + "/index.html", "title": "Test home",
    }


def test_invalid_parameters_name_the_field(api):
    message = envelope(api.post("/main/plugin/web/open", json={"url": "not a url"}), 400)
    assert "'url'" in message
    message = envelope(api.post("/main/plugin/web/open", json={}), 400)
    assert "'url'" in message


def test_malformed_json_answers_422(api):
    response = api.post("/main/plugin/web/open", content=b"{nope", headers={"Content-Type": "application/json"})
    envelope(response, 422)
    envelope(api.post("/main/plugin/web/open", json=[1, 2]), 400)


def test_unknown_family_or_action_answers_404(api):
    assert "nope/open" in envelope(api.get("/main/plugin/nope/open"), 404)
    assert "web/nope" in envelope(api.get("/main/plugin/web/nope"), 404)


def test_playwright_timeout_inside_an_action_answers_408_and_the_page_goes_on(api, site):
    response = api.post("/main/plugin/web/open", json={"url": site.url + "/slow?ms=3000", "timeout_ms": 200})
    assert "timed out" in envelope(response, 408)
    assert api.get("/main/plugin/web/state").status_code == 200


def test_an_action_past_its_time_limit_answers_408(api):
    assert "time limit" in envelope(api.get("/main/plugin/testing/overrun"), 408)
    assert api.get("/main/plugin/web/state").status_code == 200


def test_a_crashing_action_answers_500_without_traceback_and_the_page_stays_usable(api, worker):
    message = envelope(api.get("/main/plugin/testing/crash"), 500)
    assert "on purpose" not in message and "RuntimeError" not in message
    assert api.get("/main/plugin/web/state").status_code == 200
    assert "on purpose" in worker.log()  # the traceback went to the log


def test_a_framework_error_answers_its_status_and_sentence(api):
    assert envelope(api.get("/main/plugin/testing/refuse"), 418) == "The testing plugin refuses."


def test_an_action_that_closes_its_tab_leaves_a_usable_page(api):
    assert api.get("/main/plugin/testing/close-tab").status_code == 200
    assert api.get("/main/plugin/web/state").json()["url"] == "about:blank"


# --- primitives -------------------------------------------------------------------


def test_primitives_drive_the_page(api, site):
    def step(name: str, **params) -> dict:
        response = api.post(f"/main/primitive/{name}", json=params)
        assert response.status_code == 200, response.text
        return response.json()

    assert step("goto", url=site.url + "/index.html")["status"] == 200
    step("fill", selector="#name", value="Ada")
    step("click", selector="#go")
    step("wait", selector="#out:has-text('Hi Ada')")
    assert step("evaluate", expression="document.getElementById('out').textContent")["value"] == "Hi Ada"
    step("press", selector="#name", key="End")
    assert step("scroll", dy=100)["scroll"]["y"] >= 0
    assert step("wait", ms=10)["waited_ms"] == 10
    content = step("content")
    assert content["title"] == "Test home" and "Hello, Penelope" in content["html"]
    step("click", selector="#next")
    step("wait", selector="#where")
    assert step("content")["url"] == site.url + "/second.html"
    shot = step("screenshot")["media"]
    assert shot["content_type"] == "image/png" and shot["size"] > 0


def test_primitive_errors(api):
    envelope(api.post("/main/primitive/evaluate", json={"expression": "throw new Error('x')"}), 400)
    envelope(api.post("/main/primitive/wait", json={}), 400)
    envelope(api.post("/main/primitive/wait", json={"selector": "#never", "timeout_ms": 100}), 408)
    envelope(api.post("/main/primitive/teleport", json={}), 404)
    envelope(api.post("/main/primitive/content", json={}, headers={"X-Result-Ttl": "60"}), 400)


# --- busy pages ----------------------------------------------------------------------


async def test_callers_wait_in_arrival_order(worker):
    async with worker.async_client() as client:
        holder = asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 0.6, "tag": "holder"}))
        await wait_for_state(client, lambda s: s["busy"])
        waiters = []
        for n in range(4):
            waiters.append(asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 0.05, "tag": str(n)})))
            await wait_for_state(client, lambda s, n=n: s["waiting"] == n + 1)
        answers = [await task for task in [holder, *waiters]]
    assert [a.status_code for a in answers] == [200] * 5
    started = [a.json()["started"] for a in answers]
    assert started == sorted(started)
    assert [a.json()["tag"] for a in answers] == ["holder", "0", "1", "2", "3"]


async def test_a_caller_waits_at_most_page_wait_s_then_409(worker):
    # PAGE_WAIT_S is 2 in this module's worker.
    async with worker.async_client() as client:
        holder = asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 3}))
        await wait_for_state(client, lambda s: s["busy"])
        response = await client.get("/main/plugin/web/state")
        assert envelope(response, 409) == "Page main is busy."
        assert (await holder).status_code == 200


async def test_a_client_that_disconnects_while_waiting_gives_its_turn_up(worker):
    async with worker.async_client() as client:
        holder = asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 1.2, "tag": "holder"}))
        await wait_for_state(client, lambda s: s["busy"])
        async with worker.async_client(timeout=0.3) as impatient:
            with pytest.raises(httpx.ReadTimeout):
                await impatient.get("/main/plugin/testing/sleep", params={"seconds": 0, "tag": "gone"})
        patient = asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 0, "tag": "patient"}))
        await wait_for_state(client, lambda s: s["waiting"] == 1)
        assert (await holder).status_code == 200
        answer = await patient
    assert answer.json()["tag"] == "patient"


async def wait_for_state(client: httpx.AsyncClient, condition, page_id: str = "main", timeout: float = 10) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        state = (await client.get(f"/{page_id}")).json()
        if condition(state):
            return state
        assert asyncio.get_running_loop().time() < deadline, f"page never reached the state; last {state}"
        await asyncio.sleep(0.01)


# --- leases --------------------------------------------------------------------------


def test_lease_take_use_and_release(api):
    taken = api.post("/main/lease", json={"ttl": 30})
    assert taken.status_code == 201
    lease = taken.json()["lease"]
    try:
        assert "leased" in envelope(api.get("/main/plugin/web/state"), 423)
        envelope(api.get("/main/plugin/web/state", headers={"X-Lease": "wrong"}), 423)
        envelope(api.post("/main/primitive/content", headers={"X-Lease": "wrong"}), 423)
        assert api.get("/main/plugin/web/state", headers={"X-Lease": lease}).status_code == 200
        assert api.get("/main").json()["leased"] is True
        envelope(api.post("/main/lease", json={"ttl": 30}), 423)
        renewed = api.post("/main/lease", json={"ttl": 45}, headers={"X-Lease": lease})
        assert renewed.status_code == 200 and renewed.json()["lease"] == lease and renewed.json()["ttl"] == 45
        envelope(api.delete("/main/lease", headers={"X-Lease": "wrong"}), 423)
    finally:
        assert api.delete("/main/lease", headers={"X-Lease": lease}).status_code == 200
    assert api.get("/main/plugin/web/state").status_code == 200
    envelope(api.get("/main/plugin/web/state", headers={"X-Lease": lease}), 423)


@pytest.mark.parametrize("ttl", [0, -1, 601, "abc", None, "nan", "inf"])
def test_lease_ttl_out_of_range_answers_400(api, ttl):
    envelope(api.post("/main/lease", json={"ttl": ttl}), 400)
    assert api.get("/main").json()["leased"] is False


def test_a_lease_expires_after_its_ttl(api):
    lease = api.post("/main/lease", json={"ttl": 0.3}).json()["lease"]
    wait_until(lambda: not api.get("/main").json()["leased"], timeout=5, what="the lease to expire")
    assert api.get("/main/plugin/web/state").status_code == 200
    assert "unknown or expired" in envelope(api.get("/main/plugin/web/state", headers={"X-Lease": lease}), 423)


async def test_a_lease_never_expires_under_a_call_and_its_ttl_restarts_after(worker):
    async with worker.async_client() as client:
        lease = (await client.post("/main/lease", json={"ttl": 0.5})).json()["lease"]
        call = asyncio.create_task(
            client.get("/main/plugin/testing/sleep", params={"seconds": 1.2}, headers={"X-Lease": lease})
        )
        await wait_for_state(client, lambda s: s["busy"])
        # Past the TTL while the call runs: still leased, and others are refused.
        assert (await call).status_code == 200
        state = (await client.get("/main")).json()
        assert state["leased"] is True and state["lease_expires_in"] > 0.3
        assert (await client.get("/main/plugin/web/state", headers={"X-Lease": lease})).status_code == 200
        await client.delete("/main/lease", headers={"X-Lease": lease})


def test_closing_a_page_honours_its_lease(api):
    api.post("/pages", json={"page_id": "leased"})
    lease = api.post("/leased/lease", json={"ttl": 30}).json()["lease"]
    envelope(api.delete("/leased"), 423, "leased")
    assert api.delete("/leased", headers={"X-Lease": lease}).status_code == 200


async def test_a_busy_page_cannot_be_closed(worker):
    async with worker.async_client() as client:
        await client.post("/pages", json={"page_id": "busy"})
        call = asyncio.create_task(client.get("/busy/plugin/testing/sleep", params={"seconds": 0.8}))
        await wait_for_state(client, lambda s: s["busy"], page_id="busy")
        envelope(await client.delete("/busy"), 409, "busy")
        await call
        assert (await client.delete("/busy")).status_code == 200


# --- the order of checks ---------------------------------------------------------------


def test_checks_run_in_the_contract_order(api):
    # parameters (400) before the page (404)
    envelope(api.post("/nowhere/plugin/web/open", json={}), 400, "nowhere")
    # malformed body (422) before the page
    envelope(api.post("/nowhere/plugin/web/open", content=b"{", headers={"Content-Type": "application/json"}), 422, "nowhere")
    # page (404) before plugin (404)
    assert "Page nowhere" in envelope(api.get("/nowhere/plugin/nope/x"), 404, "nowhere")
    lease = api.post("/main/lease", json={"ttl": 30}).json()["lease"]
    try:
        # plugin (404) before lease (423)
        assert "nope/x" in envelope(api.get("/main/plugin/nope/x"), 404)
        # parameters (400) before lease (423)
        envelope(api.post("/main/plugin/web/open", json={}), 400)
        # lease (423) before busy (409): see test_lease_before_busy
    finally:
        api.delete("/main/lease", headers={"X-Lease": lease})


async def test_lease_before_busy(worker):
    async with worker.async_client() as client:
        lease = (await client.post("/main/lease", json={"ttl": 30})).json()["lease"]
        call = asyncio.create_task(client.get("/main/plugin/testing/sleep", params={"seconds": 0.8}, headers={"X-Lease": lease}))
        await wait_for_state(client, lambda s: s["busy"])
        envelope(await client.get("/main/plugin/web/state"), 423)
        await call
        await client.delete("/main/lease", headers={"X-Lease": lease})
