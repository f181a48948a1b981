"""The docs runner's own rules (tests/support/docs.py), in-process: what makes
a block run, shown, or refused, and how shown output is compared."""

from __future__ import annotations

import pytest

from tests.support.docs import default_port_in, read_blocks, run_document
from tests.support.shown import compare, json_values, lenient, python_value, shown_in_block, text_differs


def doc(tmp_path, text):
    path = tmp_path / "DOC.md"
    path.write_text(text)
    return path


def test_a_block_after_a_run_is_its_output_and_a_marked_one_is_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr("tests.support.docs.ROOT", tmp_path)
    blocks = read_blocks(
        doc(
            tmp_path,
            (
                "```bash\ncurl x\n```\nprose\n```json\n{}\n```\n"
                "<!-- not run: it needs a person -->\n```bash\nread x\n```\n"
                "<!-- file: a.py -->\n```python\nx = 1\n```\n"
            ),
        )
    )
    assert [(b.lang, b.runs, b.marker) for b in blocks] == [
        ("bash", True, None),
        ("json", False, None),
        ("bash", False, "not run"),
        ("python", False, "file"),
    ]
    assert blocks[1].output_of is blocks[0] and blocks[2].note == "it needs a person"


@pytest.mark.parametrize(
    "text",
    [
        "```json\n{}\n```\n",  # shown output of nothing
        "```bash\ncurl x\n```\n```json\n{}\n```\n```json\n{}\n```\n",  # a second output, unmarked
        "<!-- not run:  -->\n```bash\nread x\n```\n",  # no reason
    ],
)
def test_an_unmarked_block_that_is_not_run_fails(tmp_path, monkeypatch, text):
    monkeypatch.setattr("tests.support.docs.ROOT", tmp_path)
    with pytest.raises(AssertionError):
        read_blocks(doc(tmp_path, text))


def test_a_block_that_runs_or_is_written_and_names_a_default_port_is_found(tmp_path, monkeypatch):
    """Issue 58: a block that names 127.0.0.1:5000 talks to whatever listens
    there for a reader on another port; the runner refuses the document."""
    monkeypatch.setattr("tests.support.docs.ROOT", tmp_path)
    path = doc(
        tmp_path,
        (
            "```bash\nWORKER=http://127.0.0.1:${PENELOPE_PORT:-5000}\n"  # 2: a default, not an address
            "curl -s $WORKER/x  # as http://127.0.0.1:5000/x\n"  # 3: a comment
            '# {"url":"http://127.0.0.1:5000"}\n'  # 4: a shown answer
            "curl -s http://localhost:5000/x\n```\n"  # 5: found
            '```json\n{"url":"http://127.0.0.1:5000"}\n```\n'  # a shown output
            "<!-- not run: it needs a person -->\n```bash\nopen http://127.0.0.1:5000/live/x\n```\n"
            "<!-- file: a.py -->\n```python\n"
            "import os\n"
            "SITE = f\"http://127.0.0.1:{os.environ.get('PENELOPE_PORT', '5000')}\"  # not http://127.0.0.1:5000\n"
            'OTHER = "ws://127.0.0.1:5100/w/a"\n```\n'  # 18: found, the waker's
            "```python\nprint('http://127.0.0.1:50001')  # another port\n```\n"
            "```bash\ncurl -s http://penelope-a.svc.cluster.local:5000/x\n```\n"  # a Service's port, not loopback
        ),
    )
    assert default_port_in(path, read_blocks(path)) == [
        "DOC.md:5: curl -s http://localhost:5000/x",
        'DOC.md:18: OTHER = "ws://127.0.0.1:5100/w/a"',
    ]


def test_a_document_that_names_the_default_port_fails_before_any_block_runs(tmp_path, monkeypatch):
    """The runner runs blocks as written on a port that is not 5000: a block
    naming 5000, a map of the worker's address, or 5000 as the port itself
    fails the document, and no block has run."""
    monkeypatch.setattr("tests.support.docs.ROOT", tmp_path)
    (tmp_path / "store").mkdir()
    good = "```bash\ntouch ran\ncurl -s http://127.0.0.1:${PENELOPE_PORT:-5000}/x || true\n```\n"
    bad = doc(tmp_path, good + "```bash\ncurl -s http://127.0.0.1:5000/x\n```\n")
    run = {"store": tmp_path / "store", "env": {"PENELOPE_PORT": "5101"}}
    with pytest.raises(AssertionError, match=r"DOC.md:6: curl -s http://127.0.0.1:5000/x"):
        run_document(bad, tmp_path, **run)
    ran = tmp_path / "home" / "checkout" / "ran"
    assert not ran.exists()
    with pytest.raises(AssertionError, match="set, not mapped"):
        run_document(doc(tmp_path, good), tmp_path, **run, addresses={"127.0.0.1:5000": "127.0.0.1:5101"})
    with pytest.raises(AssertionError, match="not the default"):
        run_document(doc(tmp_path, good), tmp_path, store=tmp_path / "store", env={"PENELOPE_PORT": "5000"})
    assert not ran.exists()
    assert len(run_document(doc(tmp_path, good), tmp_path, **run).ran) == 1
    assert ran.exists()


def test_ellipses_outside_strings_become_values():
    assert lenient('{"a":1,…,"b":[…],"c":{…},"d":…,"e":"x…"}') == (
        '{"a":1,"…": null,"b":["…"],"c":{"…": null},"d":"…","e":"x…"}'
    )
    assert python_value("{'a': (1, …), 'b': None, …}") == {"a": (1, "…"), "b": None, "…": None}


def test_shape_masks_ids_and_times_but_not_keys_states_or_flags():
    shown = {"success": True, "job_id": "13d0b7feec27b201", "state": "done", "expires_in": 599.9, "status": 200}
    assert compare(shown, {**shown, "job_id": "ffff", "expires_in": 12}) == []
    assert compare(shown, {**shown, "state": "failed"})
    assert compare(shown, {**shown, "status": 502})
    assert compare(shown, {**shown, "success": False})
    assert compare(shown, {**shown, "extra": 1})  # a key the document does not show
    assert compare({**shown, "…": None}, {**shown, "extra": 1}) == []
    assert compare(shown, {k: v for k, v in shown.items() if k != "status"})
    assert compare({"ttl": None}, {"ttl": 600})
    assert compare({"items": ["a", "…"]}, {"items": ["z", "y", "x"]}) == []
    assert compare({"items": ["a", "b"]}, {"items": ["z"]})


def test_answers_are_found_in_order_in_what_a_block_prints():
    printed = 'receiving on :8099\n{"a":1}{"b":[2]}\njob 1: stored\n[3]'
    assert json_values(printed) == [{"a": 1}, {"b": [2]}, [3]]
    assert shown_in_block('curl x\n# {"a":1,…}\necho') == [{"a": 1, "…": None}]


def test_a_shown_answer_over_several_comment_lines_is_read_and_one_that_never_reads_fails():
    assert shown_in_block('curl x\n# {"a": 1,\n#  "b": [2]}\ncurl y\n# {"c": {…}}') == [
        {"a": 1, "b": [2]},
        {"c": {"…": None}},
    ]
    with pytest.raises(AssertionError):
        shown_in_block('curl x\n# {"a": 1,\necho')


def test_plain_text_is_compared_line_by_line_with_ellipses_for_what_varies():
    printed = "Penelope waker on http://127.0.0.1:5100/api/v1\nstarted alice (pid 4242)\n"
    assert text_differs("Penelope waker on http://127.0.0.1:5100/api/v1\nstarted alice (pid …)", printed) is None
    assert text_differs("started alice (pid …)", printed)  # a line left out, and no excerpt mark
    assert text_differs("…\nstarted alice (pid …)", printed) is None
    assert text_differs("started bob (pid …)", printed)
