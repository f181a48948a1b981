"""Which container and codec a run's recording should use (issue 59): what a
SIGKILL of the writer leaves playable, and what a frame costs.

A standalone experiment, not part of the suite or the benchmarks: it needs
only PyAV (`pip install av` in a scratch venv; the worker's venv does not
have it yet) and runs in a few seconds on one core:

    python scripts/recording_codecs.py            # every variant, a table
    python scripts/recording_codecs.py --frames 8  # lighter

For each variant a child process decodes synthetic screencast frames (JPEG,
as `Page.screencastFrame` sends them, at variable timestamps), encodes them
and muxes them progressively; the parent kills it with SIGKILL once it has
muxed about half of them, then opens what is on disk with PyAV and counts
the frames it can decode and the last one's time. The same variant run to
its end gives the cost of a frame (JPEG decode + scale + encode + mux).
Finally the partial file is remuxed (stream copy) into a finished one, as
the worker's start would do for a recording a kill cut (docs/design/RECORDINGS.md).

With `--browser /usr/bin/chromium` (and Playwright in the venv), a Chromium
then checks what the design relies on: two CDP sessions on one tab each get
their own screencast, and stopping one leaves the other running; how late a
frame arrives after its `metadata.timestamp` (the same clock as
`time.time()`); and how each file plays in a `<video>` served with and
without HTTP ranges (its duration, a seek to 5 s, playback advancing).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import av

WIDTH, HEIGHT = 1280, 720
TIME_BASE = Fraction(1, 1000)  # pts in milliseconds: Chromium's frame timestamps, variable rate

VARIANTS = {
    # name: (format, codec, codec options, format options)
    "webm-vp8": (
        "webm",
        "libvpx",
        {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0", "crf": "20", "b": "2M"},
        {},
    ),
    "webm-vp8-flush": (
        "webm",
        "libvpx",
        {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0", "crf": "20", "b": "2M"},
        {"flush_packets": "1"},
    ),
    "webm-vp9-flush": (
        "webm",
        "libvpx-vp9",
        {"deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0", "row-mt": "1", "crf": "32", "b": "0"},
        {"flush_packets": "1"},
    ),
    # The screencast's JPEGs muxed as they come, no decode and no encode: a
    # capture format only (a browser's <video> does not play MJPEG), which a
    # kept recording is transcoded from once its run ends.
    "mkv-mjpeg-copy-flush": ("matroska", "copy", {}, {"flush_packets": "1"}),
    "mp4-h264": ("mp4", "libx264", {"preset": "ultrafast", "tune": "zerolatency", "crf": "28"}, {}),
    "fmp4-h264-flush": (
        "mp4",
        "libx264",
        {"preset": "ultrafast", "tune": "zerolatency", "crf": "28"},
        {"movflags": "frag_keyframe+empty_moov+default_base_moof", "frag_duration": "1000000", "flush_packets": "1"},
    ),
}


def synthetic_jpegs(count: int) -> list[tuple[int, bytes]]:
    """`count` JPEG frames of a page-like picture (white, grey lines of
    "text", a box that moves), with the gaps of a page that changes now and
    then: (timestamp in ms, JPEG bytes)."""
    row_white = bytes([255]) * (WIDTH * 4)
    row_text = bytes([90, 90, 90, 255]) * 600 + bytes([255]) * ((WIDTH - 600) * 4)
    encoder = av.CodecContext.create("mjpeg", "w")
    encoder.width, encoder.height, encoder.pix_fmt = WIDTH, HEIGHT, "yuvj420p"
    encoder.time_base = Fraction(1, 25)
    encoder.options = {"q:v": "5"}
    frames, at = [], 0
    gaps = [33, 33, 100, 500, 33, 250, 1500, 66]
    for index in range(count):
        rows = bytearray()
        for y in range(HEIGHT):
            rows += row_text if (y // 12) % 3 == 0 and 80 < y < 650 else row_white
        box = 100 + (index * 37) % 900
        for y in range(300, 400):  # a 160 px box that moves right each frame
            start = (y * WIDTH + box) * 4
            rows[start : start + 160 * 4] = bytes([30, 120, 220, 255]) * 160
        picture = av.VideoFrame.from_bytes(bytes(rows), WIDTH, HEIGHT, format="rgba").reformat(format="yuvj420p")
        picture.pts = index
        packets = encoder.encode(picture)
        frames.append((at, bytes(packets[0])))
        at += gaps[index % len(gaps)]
    return frames


def write(variant: str, path: str, frames_file: str, pause_s: float) -> None:
    """The child: decode, encode and mux each frame, saying each one done on stdout."""
    fmt, codec, codec_options, format_options = VARIANTS[variant]
    frames = json.loads(Path(frames_file).read_text())
    container = av.open(path, "w", format=fmt, options=format_options)
    if codec == "copy":
        copy(container, frames, pause_s)
        return
    stream = container.add_stream(codec, rate=None)
    stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
    stream.codec_context.time_base = TIME_BASE
    stream.time_base = TIME_BASE
    stream.codec_context.gop_size = 60  # a keyframe at least every 60 frames
    stream.codec_context.thread_count = 1  # as in the worker: one core's worth at most, beside Chromium
    stream.codec_context.options = codec_options
    decoder = av.CodecContext.create("mjpeg", "r")
    timings = []
    for index, (at_ms, hex_jpeg) in enumerate(frames):
        began = time.perf_counter()
        (picture,) = decoder.decode(av.Packet(bytes.fromhex(hex_jpeg)))
        picture = picture.reformat(WIDTH, HEIGHT, format="yuv420p")
        decoded = time.perf_counter()
        picture.pts, picture.time_base = at_ms, TIME_BASE
        for packet in stream.encode(picture):
            container.mux(packet)
        timings.append((time.perf_counter() - began, decoded - began))
        print(index, flush=True)
        time.sleep(pause_s)
    for packet in stream.encode(None):
        container.mux(packet)
    container.close()
    print("costs", json.dumps(timings), flush=True)


def copy(container: av.container.OutputContainer, frames: list, pause_s: float) -> None:
    """The child's pass-through: each JPEG muxed as one packet at its time."""
    stream = container.add_stream("mjpeg", rate=None)
    stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuvj420p"
    stream.time_base = TIME_BASE
    timings = []
    for index, (at_ms, hex_jpeg) in enumerate(frames):
        data = bytes.fromhex(hex_jpeg)
        began = time.perf_counter()
        packet = av.Packet(data)
        packet.pts = packet.dts = at_ms
        packet.time_base = TIME_BASE
        packet.stream = stream
        packet.is_keyframe = True
        container.mux(packet)
        timings.append((time.perf_counter() - began, 0.0))
        print(index, flush=True)
        time.sleep(pause_s)
    container.close()
    print("costs", json.dumps(timings), flush=True)


def readable(path: str) -> tuple[int, float, str]:
    """What a reader gets from a file: frames decoded, the last one's time
    (s), and an error if it stopped on one, or the note that the file
    declares no duration (a browser's <video> then cannot seek it well)."""
    count, last, error = 0, 0.0, ""
    try:
        with av.open(path) as container:
            if not container.duration:
                error = "no duration"
            stream = container.streams.video[0]
            for frame in container.decode(stream):
                count += 1
                last = float(frame.pts * stream.time_base) if frame.pts is not None else last
    except Exception as exc:  # a reader's view: whatever stops it
        error = f"{type(exc).__name__}: {exc}"[:80]
    return count, last, error


def remux(path: str, fmt: str) -> tuple[str, float]:
    """Stream-copy a cut recording into a finished one (its trailer: duration, cues or index)."""
    began = time.perf_counter()
    out = path + ".fixed." + {"webm": "webm", "mp4": "mp4"}.get(fmt, "mkv")
    with av.open(path) as source, av.open(out, "w", format=fmt) as target:
        inp = source.streams.video[0]
        outp = target.add_stream_from_template(inp)
        for packet in source.demux(inp):
            if packet.dts is None:
                continue
            packet.stream = outp
            target.mux(packet)
    return out, (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--pause", type=float, default=0.02, help="seconds the writer waits between frames")
    parser.add_argument("--kill-at", type=int, default=0, help="frames muxed before the kill (default: half)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--browser", help="a Chromium to check screencasts and playback with (needs playwright)")
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "PATH", "FRAMES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        write(args.child[0], args.child[1], args.child[2], args.pause)
        return
    folder = Path(tempfile.mkdtemp(prefix="recording-codecs-"))
    began = time.perf_counter()
    frames = synthetic_jpegs(args.frames)
    jpeg_kb = sum(len(data) for _, data in frames) / len(frames) / 1024
    print(
        f"{len(frames)} synthetic {WIDTH}x{HEIGHT} JPEG frames, {jpeg_kb:.0f} KB each, made in {time.perf_counter() - began:.1f} s; "
        f"timestamps 0 to {frames[-1][0] / 1000:.2f} s"
    )
    frames_file = folder / "frames.json"
    frames_file.write_text(json.dumps([(at, data.hex()) for at, data in frames]))
    kill_after = args.kill_at or len(frames) // 2
    print(
        f"{'variant':18} {'muxed':>5} {'kill':>4} {'decoded':>7} {'last s':>6} {'bytes':>8}  "
        f"{'full: ms/frame p50 max':>22} {'jpeg':>5} {'KB':>6}  remux   error"
    )
    for variant in args.variants.split(","):
        fmt = VARIANTS[variant][0]
        cut = str(folder / f"{variant}.cut.{fmt}")
        child = subprocess.Popen(
            [sys.executable, __file__, "--pause", str(args.pause), "--child", variant, cut, str(frames_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        muxed = 0
        for line in child.stdout:
            if line.strip().isdigit():
                muxed = int(line) + 1
            if muxed >= kill_after:
                os.kill(child.pid, signal.SIGKILL)
                break
        child.wait()
        count, last, error = readable(cut)
        size = os.path.getsize(cut)
        full = str(folder / f"{variant}.full.{fmt}")
        run = subprocess.run(
            [sys.executable, __file__, "--pause", "0", "--child", variant, full, str(frames_file)],
            capture_output=True,
            text=True,
            check=True,
        )
        costs = sorted(json.loads(run.stdout.rsplit("costs ", 1)[1]))
        decode_ms = sorted(part for _, part in costs)[len(costs) // 2] * 1000
        costs = [whole for whole, _ in costs]
        full_count, _, _ = readable(full)
        remux_note = ""
        if count:
            fixed, remux_ms = remux(cut, fmt)
            fixed_count, fixed_last, fixed_error = readable(fixed)
            remux_note = f"{remux_ms:.0f} ms -> {fixed_count} fr {fixed_last:.2f} s {fixed_error}"
        print(
            f"{variant:18} {muxed:5} {'-9':>4} {count:7} {last:6.2f} {size:8}  "
            f"{costs[len(costs) // 2] * 1000:14.1f} {costs[-1] * 1000:6.1f} {decode_ms:5.1f} {os.path.getsize(full) / 1024:7.0f}  "
            f"{remux_note} {error} (full file: {full_count} frames)"
        )
    print(f"files in {folder}")
    if args.browser:
        import asyncio  # only here: the browser checks are optional

        asyncio.run(in_browser(args.browser, folder))


# A page that changes every 50 ms, for the screencast checks.
CLOCK_PAGE = """<html><body style=margin:0><div id=c style="font:40px sans-serif">0</div>
<script>setInterval(() => { c.textContent = Date.now() }, 50)</script></body></html>"""

# How a <video> takes a file: its duration, where a seek to 5 s lands, and whether it plays.
PLAY_JS = """async (src) => {
  const v = document.createElement('video'); v.muted = true; v.src = src; document.body.append(v);
  const state = await new Promise(done => { v.onloadedmetadata = () => done('loaded');
    v.onerror = () => done('error ' + (v.error && v.error.code)); setTimeout(() => done('timeout'), 5000); });
  if (state !== 'loaded') return {state};
  const duration = v.duration;
  v.currentTime = 5; await new Promise(done => { v.onseeked = done; setTimeout(done, 3000); });
  const seeked = v.currentTime;
  await v.play().catch(() => {}); const from = v.currentTime; await new Promise(done => setTimeout(done, 700));
  return {state, duration, seeked_to: seeked, played_s: +(v.currentTime - from).toFixed(2), size: `${v.videoWidth}x${v.videoHeight}`};
}"""


def serve(folder: Path, ranges: bool):
    """The folder over HTTP on loopback, answering `Range` (206) or not."""
    import http.server  # only here: the browser checks are optional
    import threading

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, *args):
            pass

        def do_GET(self):
            path = folder / self.path.lstrip("/")
            asked = self.headers.get("Range", "")
            if not ranges or not asked.startswith("bytes=") or not path.is_file():
                return super().do_GET()
            data = path.read_bytes()
            first, _, last = asked.removeprefix("bytes=").partition("-")
            start, end = int(first or 0), int(last) if last else len(data) - 1
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Type", self.guess_type(str(path)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Range", f"bytes {start}-{start + len(body) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def in_browser(executable: str, folder: Path) -> None:
    import asyncio  # only here: the browser checks are optional

    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True)
        page = await browser.new_page(viewport={"width": 1280, "height": 720})
        await page.set_content(CLOCK_PAGE)
        counts, late = {"a": 0, "b": 0}, []

        async def cast(name: str):
            session = await page.context.new_cdp_session(page)

            def frame(params: dict) -> None:
                counts[name] += 1
                stamp = (params.get("metadata") or {}).get("timestamp")
                if stamp:
                    late.append(time.time() - stamp)
                asyncio.ensure_future(session.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]}))

            session.on("Page.screencastFrame", frame)
            await session.send(
                "Page.startScreencast", {"format": "jpeg", "quality": 60, "maxWidth": WIDTH, "maxHeight": WIDTH}
            )
            return session

        first, second = await cast("a"), await cast("b")
        await asyncio.sleep(2)
        print(f"two sessions casting one tab for 2 s: {counts['a']} and {counts['b']} frames")
        await first.send("Page.stopScreencast")
        before = dict(counts)
        await asyncio.sleep(1.5)
        print(f"1.5 s after the first stopped: +{counts['a'] - before['a']} and +{counts['b'] - before['b']} frames")
        await second.send("Page.stopScreencast")
        late.sort()
        print(
            f"a frame's arrival after its metadata.timestamp: p50 {late[len(late) // 2] * 1000:.1f} ms, "
            f"min {late[0] * 1000:.1f}, max {late[-1] * 1000:.1f} ({len(late)} frames)"
        )
        print(
            "canPlayType:",
            await page.evaluate("""() => { const v = document.createElement('video'); return {
            vp8: v.canPlayType('video/webm; codecs="vp8"'), h264: v.canPlayType('video/mp4; codecs="avc1.42E01E"')} }"""),
        )
        files = sorted(
            path.name for path in folder.iterdir() if path.suffix in (".webm", ".mp4") and path.stat().st_size > 100
        )
        for ranges in (False, True):
            server = serve(folder, ranges)
            base = f"http://127.0.0.1:{server.server_port}"
            await page.goto(base + "/frames.json")
            for name in files:
                print(
                    f"{'with' if ranges else 'without'} ranges: {name}: {await page.evaluate(PLAY_JS, f'{base}/{name}')}"
                )
            server.shutdown()
        await browser.close()


if __name__ == "__main__":
    main()
