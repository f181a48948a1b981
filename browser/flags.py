"""The flags every Chromium of Penelope's starts with (the worker's, the
shell's, and the benchmark's raw Playwright beside them). No settings are
read here, so a process without Django may import it."""

# Chromium's own traffic (updates, sync, metrics) has no business on a
# persona's connection, and in closed networks it only produces errors.
CHROMIUM_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--disable-gpu",
]
