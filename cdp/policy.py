"""What a CDP client may not ask of the persona's browser, and why.

A client connected at `/cdp/<token>` drives its leased page and the tabs it
opens. Every message it sends passes `refusal()` first; a refused one is
answered with a CDP error naming the reason and never reaches Chromium.
docs/guides/BRING_YOUR_OWN_SCRIPT.md lists the same rules for users.

Other targets are kept out by the bridge itself (cdp/bridge.py): the client
only ever holds sessions the bridge attached for it, so a message for any
other page has nowhere to go.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

# Methods refused wherever they are sent, with the reason the client reads.
REFUSED = {
    "Browser.close": "the browser is the persona's, not the client's: disconnect instead",
    "Browser.crash": "the browser is the persona's, not the client's: disconnect instead",
    "Browser.crashGpuProcess": "the browser is the persona's, not the client's",
    "Browser.executeBrowserCommand": "browser commands act on every tab of the persona",
    "Page.setDownloadBehavior": "downloads go to the worker's own folder; a client does not choose a path on its host",
    "DOM.setFileInputFiles": (
        "it reads files from the worker's host; give the file's bytes instead "
        "(Playwright's set_input_files with a buffer, or web/upload with POST /api/v1/media)"
    ),
    "Target.createBrowserContext": "a new context could carry a proxy of its own; open tabs in the persona's context",
    "Target.disposeBrowserContext": "the persona's context is the worker's",
    "Target.exposeDevToolsProtocol": "it would hand the page a CDP channel outside the worker's rules",
    "Target.setRemoteLocations": "the browser's discovery settings are the worker's",
    "Target.sendMessageToTarget": "the flat protocol only: send with a sessionId",
    "Security.setIgnoreCertificateErrors": "it would turn certificate checks off for every page of the persona",
    "Extensions.loadUnpacked": "it loads code from the worker's host into the persona's browser",
    "Extensions.uninstall": "the persona's extensions are the worker's",
    "Tracing.start": "a trace records every tab of the browser, not only the client's",
    "SystemInfo.getProcessInfo": "it lists every process of the persona's browser",
    "Page.crash": "the page's renderer may hold other pages of the persona",
    "Browser.setWindowBounds": "windows are the persona's, one a tab; the viewport is Emulation's",
    "Browser.getBrowserCommandLine": "the command line names the persona's profile and its proxy",
    "Page.setRPHRegistrationMode": (
        "a protocol handler it lets a page register without asking stays in the persona's profile, for every page"
    ),
    # What Chromium keeps on the page after the client's session is detached
    # (checked with Chromium 156): the worker's page would keep it.
    "Emulation.setVirtualTimePolicy": "Chromium keeps the page's clock paused after the connection ends, on the worker's page",
    "Page.setWebLifecycleState": "Chromium keeps the page frozen after the connection ends, on the worker's page",
    "Page.setFontSizes": "Chromium keeps the page's font sizes after the connection ends, on the worker's page",
}

# Domains a client may use inside its pages' sessions; the rest act on more
# than the page (the browser, its service workers, its installed apps, its
# memory, its devices) and are refused there. Target and Browser have rules
# of their own (cdp/bridge.py, cdp/targets.py).
SESSION_DOMAINS = frozenset({
    "Accessibility", "Animation", "Audits", "Autofill", "CSS", "CacheStorage", "Console", "DOM", "DOMDebugger",
    "DOMSnapshot", "DOMStorage", "Debugger", "DeviceOrientation", "Emulation", "EventBreakpoints", "Fetch",
    "FileSystem", "HeapProfiler", "IO", "IndexedDB", "Input", "Inspector", "LayerTree", "Log", "Media", "Network",
    "Overlay", "Page", "Performance", "PerformanceTimeline", "Preload", "Profiler", "Runtime", "Schema", "Security",
    "Storage", "Target", "Browser", "WebAudio", "WebAuthn", "WebMCP",
})
# Browser's methods inside a page's session (the rest are the browser's).
# The permission calls are answered before this applies, in any session, by
# the ledger that undoes them at the client's end (cdp/permissions.py).
SESSION_BROWSER_CALLS = frozenset({"Browser.getVersion", "Browser.getWindowForTarget", "Browser.setDownloadBehavior"})

# Answered without reaching Chromium: the persona's own setting stays.
NOT_APPLIED = {
    "Browser.setDownloadBehavior": "downloads go to the worker's own folder",
    # Chromium keeps a page's fonts after the session that set them is detached.
    # Playwright's set-up sends its defaults for every page, the very ones the
    # worker's own Playwright set already: answered, so its set-up goes on.
    "Page.setFontFamilies": "the page's fonts are the worker's, and Playwright's defaults are set already",
}

# Schemes a client may navigate to or open a tab at: the web's, and the
# empty pages. file: reads the host; chrome:, devtools: and the like are the
# browser's own pages, where its settings live.
WEB_SCHEMES = frozenset({"http", "https", "about", "data", "blob"})
# about: opens Chromium's own pages too (about:flags is chrome://flags, where
# the next launch's flags are set): only the empty ones pass.
ABOUT_PAGES = frozenset({"blank", "srcdoc"})
NAVIGATIONS = {"Page.navigate": "url", "Target.createTarget": "url"}


def refusal(method: str, params: dict[str, Any]) -> str | None:
    """Why `method` with `params` is refused, or None when it may pass."""
    reason = REFUSED.get(method)
    if reason is not None:
        return reason
    field = NAVIGATIONS.get(method)
    if field is not None:
        url = params.get(field)
        if isinstance(url, str) and url:
            parts = urlsplit(url.strip())
            scheme = parts.scheme.lower()
            if scheme not in WEB_SCHEMES:
                return f"{scheme or 'a relative'} URLs are not opened for a CDP client: only {', '.join(sorted(WEB_SCHEMES))}"
            if scheme == "about" and parts.path.lower() not in ABOUT_PAGES:
                return "about: pages other than about:blank and about:srcdoc are the browser's own"
    data = params.get("data")
    if method == "Input.dispatchDragEvent" and isinstance(data, dict) and data.get("files"):
        return "a drop of files reads them from the worker's host; give the page the file's bytes instead"
    if method.startswith("ServiceWorker."):
        return "service workers are shared by every page of their origin, the persona's other pages too"
    return None


def target_filter(value: Any) -> list[dict[str, Any]] | None:
    """A Target filter as a client sent it (a list of objects), or None for
    none; ValueError for anything else."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise ValueError("filter is a list of objects")
    return value


def allows(filters: list[dict[str, Any]] | None, target_type: str) -> bool:
    """Whether an auto-attach or discovery filter of Target's takes targets
    of `target_type`: the first entry that matches decides; none, Chromium's
    default (everything but the browser and tab targets)."""
    if filters is None:
        return target_type not in ("browser", "tab")
    for entry in filters:
        if not isinstance(entry, dict):
            continue
        if entry.get("type") in (None, target_type):
            return not entry.get("exclude", False)
    return False
