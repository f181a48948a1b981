"""docs/guides/WRITING_PLUGINS.md does what it says: each of its code blocks,
in order. A block after `<!-- file: PATH -->` is written under the families'
folder (the first block of a path replaces the file, the next ones add to
it), one after `<!-- add to: PATH -->` is added to the file there (one the
scaffold wrote); a block after `<!-- run -->` runs with bash from the
checkout, its home a throwaway folder, and must succeed. No other block is
allowed, so every block of the guide is run."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from harness.worker import ROOT

GUIDE = ROOT / "docs" / "guides" / "WRITING_PLUGINS.md"
BLOCK = re.compile(
    r"(?:<!-- (?P<marker>run|file: (?P<path>\S+)|add to: (?P<added>\S+)) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)\n```", re.S
)


def blocks() -> list[tuple[str, str | None, str]]:
    """Each fenced block of the guide: (`run`, `file` or `add`, its path, its code)."""
    found = []
    for match in BLOCK.finditer(GUIDE.read_text()):
        marker = match["marker"]
        assert marker is not None, f"a block of the guide is neither run nor written:\n{match['code'][:200]}"
        kind = "run" if marker == "run" else "file" if match["path"] else "add"
        found.append((kind, match["path"] or match["added"], match["code"] + "\n"))
    return found


def test_every_block_of_the_guide_runs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    for name in ("PENELOPE_PLUGINS", "PYTHONPATH", "PENELOPE_HOME", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    env["PENELOPE_STORE"] = str(tmp_path / "store")  # run_action's, which it must leave alone
    written: set[Path] = set()
    ran = 0
    for kind, path, code in blocks():
        if kind in ("file", "add"):
            target = home / "families" / path
            assert kind == "file" or target.is_file(), f"the guide adds to {path}, which is not there"
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "a" if target in written or kind == "add" else "w") as file:
                file.write(code)
            written.add(target)
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{code}\nexit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        ran += 1
        if "pytest" in code:
            assert re.search(r"\b6 passed\b", done.stdout), done.stdout[-2000:]
        if "run_action shop/state" in code:
            assert '"title": "Teas"' in done.stdout and '"on_shop": true' in done.stdout, done.stdout
    assert ran == 3 and len(written) == 7
    assert not (tmp_path / "store" / "media").exists()  # the shell kept its files out of the store
