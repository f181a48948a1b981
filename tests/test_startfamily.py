"""`manage.py startfamily`: the family it writes passes its own tests as
written (run in a pytest of their own, from a folder outside the project, as
an author runs them), loads in a real worker, and passes the project's lint;
a name or folder it refuses writes nothing."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from harness.worker import ROOT, WorkerProcess

NAME = "pantry"
WRITTEN = ["__init__.py", "pages/index.html", "tests/conftest.py", f"tests/test_{NAME}.py"]


def startfamily(*args: str) -> str:
    out = io.StringIO()
    call_command("startfamily", *args, stdout=out)
    return out.getvalue()


def tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def author_env() -> dict[str, str]:
    """This process's environment without what the project's own test run
    set: the family's tests find Penelope and the family by themselves."""
    env = dict(os.environ)
    for name in ("DJANGO_SETTINGS_MODULE", "PENELOPE_PLUGINS", "PYTHONPATH", "PENELOPE_HOME", "PENELOPE_STORE"):
        env.pop(name, None)
    return env


def test_the_family_it_writes_passes_its_own_tests_and_the_lint(tmp_path):
    out = startfamily(NAME, "--dir", str(tmp_path))
    family = tmp_path / NAME
    assert sorted(str(path.relative_to(family)) for path in family.rglob("*") if path.is_file()) == sorted(WRITTEN)
    for relative in WRITTEN:
        assert f"  {NAME}/{relative}\n" in out
    assert f"PENELOPE_PLUGINS=plugins.web,plugins.demo,{NAME} PYTHONPATH={tmp_path} scripts/serve.sh" in out
    assert f"{sys.executable} -m pytest {family / 'tests'} -q" in out
    conftest = (family / "tests" / "conftest.py").read_text()
    assert f'or "{ROOT}"' in conftest and "{{" not in conftest

    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "ruff.toml"),
                           str(family)], capture_output=True, text=True)  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr

    # As an author runs them: from a folder of their own, away from the project's pytest.ini.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(family / "tests"), "-q", "-p", "no:cacheprovider",
         "--basetemp", str(tmp_path / "basetemp")],
        cwd=tmp_path, env=author_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert re.search(r"\b8 passed\b", run.stdout), run.stdout[-3000:]
    assert not (tmp_path / "store").exists()  # the kit's own settings kept their store out of the author's folder


def test_the_family_it_writes_loads_in_a_worker(tmp_path, tmp_path_factory):
    startfamily(NAME, "--dir", str(tmp_path))
    env = {"PENELOPE_PLUGINS": f"plugins.web,{NAME}", "PYTHONPATH": str(tmp_path)}
    worker = WorkerProcess(tmp_path_factory.mktemp("store"), env=env).start()
    try:
        with worker.client() as api:
            answer = api.post(f"/main/plugin/{NAME}/state", json={})
            assert answer.status_code == 200, answer.text
            assert set(answer.json()) == {"success", "page_id", "url", "title"}
            bad = api.post(f"/main/plugin/{NAME}/get-items", json={"url": "ftp://example.com/"})
            assert bad.status_code == 400 and "url" in bad.json()["error"]
    finally:
        worker.stop()


def test_without_dir_it_writes_into_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = startfamily(NAME)
    assert (tmp_path / NAME / "__init__.py").is_file() and f"in {tmp_path / NAME}:" in out
    assert 'Family("pantry", version="0.1.0")' in (tmp_path / NAME / "__init__.py").read_text()


@pytest.mark.parametrize(
    "name, refusal",
    [
        ("Shop", "A family's name is 1 to 32 of a-z, 0-9 and _, starting with a letter (e.g. shop); 'Shop' is not."),
        ("1shop", "'1shop' is not"),
        ("shop-x", "'shop-x' is not"),
        ("a" * 33, f"'{'a' * 33}' is not"),
        ("", "'' is not"),
        ("class", "class is a Python keyword, so no module can have it: choose another name."),
        ("json", "A module named json can be imported already: choose a name no module has."),
        ("httpx", "A module named httpx can be imported already"),
        ("plugins", "A module named plugins can be imported already"),
        ("web", "The worker loads a family named web already (PENELOPE_PLUGINS): choose another name."),
        ("demo", "The worker loads a family named demo already"),
        ("taken", "/taken exists already; startfamily never overwrites anything."),
        ("clash", "/clash.py exists already; startfamily never overwrites anything."),
    ],
)
def test_a_refused_name_writes_nothing(tmp_path, name, refusal):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("kept")
    (tmp_path / "clash.py").write_text("kept = True\n")
    before = tree(tmp_path)
    with pytest.raises(CommandError) as refused:
        startfamily(name, "--dir", str(tmp_path))
    assert refusal in str(refused.value)
    assert tree(tmp_path) == before
    assert (tmp_path / "taken" / "mine.txt").read_text() == "kept"


def test_a_missing_folder_is_refused_and_not_made(tmp_path):
    with pytest.raises(CommandError, match=r"nope is not a folder: make it first, or name another with --dir\."):
        startfamily(NAME, "--dir", str(tmp_path / "nope"))
    (tmp_path / "file").write_text("")
    with pytest.raises(CommandError, match=r"file is not a folder"):
        startfamily(NAME, "--dir", str(tmp_path / "file"))
    assert tree(tmp_path) == ["file"]
