"""A body of JSON's whitespace only (`curl -d $'\\n'`) is no parameters, as an
empty body is (issue 31 item 4); any other body that is not JSON, a
vertical tab or a form feed alone included, answers 422. On a real worker,
as curl sends them."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("body", [b"", b"\n", b" \t\r\n ", b"\r\n\r\n"])
def test_an_empty_or_whitespace_only_body_is_no_parameters(api, body):
    response = api.post("/main/plugin/web/state", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 200, response.text
    assert response.json()["success"] is True
    # and a required parameter is still missing: the body was read as {}
    missing = api.post("/main/plugin/web/evaluate", content=body)
    assert missing.status_code == 400 and "expression" in missing.json()["error"]


@pytest.mark.parametrize("body", [b"\x0b", b"\x0c", b"\n\x0c\n", b"\xc2\xa0", b"\n}"])
def test_a_body_that_is_not_json_whitespace_answers_422(api, body):
    response = api.post("/main/plugin/web/state", content=body)
    assert response.status_code == 422, response.text
    assert response.json() == {"success": False, "error": "The request body is not valid JSON.", "page_id": "main"}
