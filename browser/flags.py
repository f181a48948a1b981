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
