"""SCALING.md's blocks run in order: `waker export-kubernetes` writes the
overlay of its personas file, whose files and kinds are compared with what
the guide shows, line by line. Building the image, applying the overlay and
calling the interceptor need podman, a registry or a cluster: those blocks
are marked, each naming what covers it."""

from __future__ import annotations

from harness.worker import ROOT
from tests.support.docs import run_document

DOC = ROOT / "docs" / "guides" / "SCALING.md"


def test_every_block_of_the_scaling_guide_runs(tmp_path):
    (tmp_path / "store").mkdir()
    done = run_document(DOC, tmp_path, store=tmp_path / "store", env={}, addresses={})
    overlay = tmp_path / "home" / "overlays" / "penelope"
    assert sorted(path.name for path in overlay.iterdir()) == [
        "alice.yaml",
        "bob.yaml",
        "console.yaml",
        "kustomization.yaml",
        "namespace.yaml",
    ]
    assert (len(done.ran), len(done.not_run), done.compared) == (1, 4, 1)
