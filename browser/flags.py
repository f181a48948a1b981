"""The flags every Chromium of Penelope's starts with (the worker's, the
shell's, and the benchmark's raw Playwright beside them), and the options
of Playwright's driver. No settings are read here, so a process without
Django may import it."""

from __future__ import annotations

import os

from browser.tap import HOOK, SOCKET_ENV

# Playwright's own `--disable-features` (its chromiumSwitches.ts, playwright
# 1.65): Chromium keeps only the last `--disable-features` of its command
# line, so ours must repeat them. tests/test_browser_flags.py reads the
# command line of a real launch and fails when Playwright changes its list.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding", "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin", "OptimizationHints", "NetworkTimeServiceQuerying",
    "AimEnabled", "PreconnectToSearch", "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion",
)
# Off to make a persona cheaper (docs/BENCHMARKS.md, issue 46). Site
# isolation and the sandbox are untouched: every site's pages still get
# renderers of their own.
# - The address bar's popups as WebUI pages: a headless persona never shows
#   them, yet Chromium renders them at start in renderer processes of their
#   own, about 54 MB of anonymous memory a persona. Without them the popup
#   is Chromium's native one, never drawn here.
# - The spare renderer, started ahead for the next site a tab goes to: about
#   20 MB a persona, for 11 ms more on a navigation to another site.
MEMORY_FEATURES_OFF = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "SpareRendererForSitePerProcess")

# Chromium's own traffic (updates, sync, metrics) has no business on a
# persona's connection, and in closed networks it only produces errors.
CHROMIUM_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-first-run",
    "--disable-gpu",
    "--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + MEMORY_FEATURES_OFF),
]

# Playwright's driver (Node) with a young generation of 1 MB rather than its
# default 16: about 23 MB less of anonymous memory a persona, and a step no
# slower (its scavenges are shorter). Measured in docs/BENCHMARKS.md, issue 46.
DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"
# The driver tap (browser/tap.cjs strips exactly this from what Chromium inherits).
TAP_OPTION = f'--require "{HOOK}"'


def set_driver_options(tap: str | None = None) -> None:
    """Give the driver Playwright starts next its options (it inherits this
    process's environment), beside NODE_OPTIONS of the operator's own unless
    they size the young generation themselves; and with `tap` (the socket
    of browser/tap.py), the driver tap, which takes both of its own out of
    the environment Chromium inherits. Once the driver runs,
    `clear_driver_tap` takes them out of this process's."""
    own = os.environ.get("NODE_OPTIONS", "")
    if "--max-semi-space-size" not in own:
        own = f"{own} {DRIVER_NODE_OPTIONS}".strip()
    if tap is not None:
        os.environ[SOCKET_ENV] = tap
        if TAP_OPTION not in own:
            own = f"{own} {TAP_OPTION}"
    os.environ["NODE_OPTIONS"] = own


def clear_driver_tap() -> None:
    """No later child of this process loads the tap."""
    os.environ.pop(SOCKET_ENV, None)
    if "NODE_OPTIONS" in os.environ:
        os.environ["NODE_OPTIONS"] = os.environ["NODE_OPTIONS"].replace(TAP_OPTION, "").strip()


# BROWSER_REFUSE_PRIVATE (browser/egress.py): beside the egress proxy, which
# carries every connection the browser makes over TCP, nothing goes out
# another way. WebRTC's UDP never goes through a proxy, so it is not sent;
# QUIC neither; and Chromium resolves no name itself (the egress resolves
# each, and a lookup is itself a way to send a name out).
GUARDED_ARGS = [
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-quic",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
