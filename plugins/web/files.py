"""The `web` actions that answer files: screenshots and PDFs.

One capture of a very tall page comes back from Chromium at the right size
but plain white below some point (from about 104,000 px on the tests'
text-heavy page, later on lighter ones), and nothing says so; a capture of a
clip of the same page is whole wherever the clip lies. So a full page (or an
element) taller than `SCREENSHOT_PART_HEIGHT` is captured in clips of at most
that height: a PNG's parts are joined into one file (`PngJoiner`), row by row,
never holding the whole image; JPEG parts are answered as files in order,
since a JPEG cannot be taller than 65,535 px.
"""

from __future__ import annotations

import asyncio
import io
import re
import struct
import zlib
from typing import Any

from django.conf import settings
from PIL import Image
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from rest_framework import serializers

from core.shapes import Flag, Text
from plugins.framework import Context, PluginError
from plugins.web.base import ReadParams, action, first_match, wait_for
from plugins.web.error_page import error_page_committing, no_document, shows_error_page

# --- screenshots ---------------------------------------------------------------------

JPEG_MAX_SIDE = 65_535

# The size Playwright gives a full-page capture, in CSS pixels.
PAGE_SIZE_JS = """() => {
  const body = document.body || {}, root = document.documentElement;
  return {
    width: Math.max(body.scrollWidth || 0, root.scrollWidth, body.offsetWidth || 0, root.offsetWidth, body.clientWidth || 0, root.clientWidth),
    height: Math.max(body.scrollHeight || 0, root.scrollHeight, body.offsetHeight || 0, root.offsetHeight, body.clientHeight || 0, root.clientHeight),
  };
}"""

# An element's box in the document's CSS pixels, widened to whole pixels.
ELEMENT_RECT_JS = """(element) => {
  const box = element.getBoundingClientRect();
  const left = Math.floor(box.left + window.scrollX), top = Math.floor(box.top + window.scrollY);
  return {x: left, y: top, width: Math.ceil(box.right + window.scrollX) - left, height: Math.ceil(box.bottom + window.scrollY) - top};
}"""


class ScreenshotParams(ReadParams):
    full_page = Flag(default=False, help_text="The whole page, not only the viewport.")
    selector = Text(max_length=1000, required=False, help_text="One element only (the first match); not with full_page: true.")
    format = serializers.ChoiceField(choices=["png", "jpeg"], default="png")
    quality = serializers.IntegerField(
        min_value=0, max_value=100, required=False, help_text="JPEG quality: only with format jpeg (with png, 400)."
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("selector") and data["full_page"]:
            raise serializers.ValidationError("give selector or full_page, not both.")
        if "quality" in data and data["format"] != "jpeg":
            raise serializers.ValidationError("quality goes with format jpeg (a PNG is lossless).")
        return data


@action("screenshot", params=ScreenshotParams)
async def screenshot(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await wait_for(page, params.get("wait_for"))
    kind = params["format"]
    options: dict[str, Any] = {"type": kind}
    if "quality" in params:
        options["quality"] = params["quality"]
    part_height = max(1, settings.SCREENSHOT_PART_HEIGHT)
    if kind == "jpeg":
        part_height = min(part_height, JPEG_MAX_SIDE)

    extension = "png" if kind == "png" else "jpg"
    files: list[dict[str, Any]] = []
    sizes: list[tuple[int, int]] = []

    async def store(image: bytes, single: bool) -> None:
        """Each image is stored as it is taken: a JPEG's parts are never held together."""
        sizes.append(image_size(image))
        filename = f"screenshot.{extension}" if single else f"screenshot-{len(files) + 1}.{extension}"
        files.append(await ctx.put_media(image, content_type=f"image/{kind}", filename=filename))

    clips = await plan_clips(page, params, part_height)
    if clips is None:
        await store(await capture_whole(page, params, options), single=True)
    elif kind == "png":
        await store(await joined_png(page, clips), single=True)
    else:
        for clip in clips:
            await store(await page.screenshot(clip=clip, full_page=True, **options), single=len(clips) == 1)
    return {
        "media": files[0],
        "files": files,
        "width": sizes[0][0],
        "height": sum(height for _, height in sizes),
        "parts": 1 if clips is None else len(clips),
    }


async def plan_clips(page: Page, params: dict[str, Any], part_height: int) -> list[dict[str, int]] | None:
    """None when one capture takes the area (the viewport, or a page or an
    element no taller than a part and within SCREENSHOT_PART_PIXELS); else the clips
    that cover it, each within both bounds (a very wide page gets lower parts)."""
    if params.get("selector"):
        area = await (await first_match(page, params["selector"])).evaluate(ELEMENT_RECT_JS)
    elif params["full_page"]:
        area = {"x": 0, "y": 0, **await page.evaluate(PAGE_SIZE_JS)}
    else:
        return None
    part_height = min(part_height, max(1, settings.SCREENSHOT_PART_PIXELS // max(1, area["width"])))
    if area["height"] <= part_height:
        return None
    return part_clips(area, part_height)


async def capture_whole(page: Page, params: dict[str, Any], options: dict[str, Any]) -> bytes:
    if params.get("selector"):
        return await (await first_match(page, params["selector"])).screenshot(**options)
    return await page.screenshot(full_page=params["full_page"], **options)


def part_clips(area: dict[str, int], part_height: int) -> list[dict[str, int]]:
    """The clips, top to bottom, that cover `area` in parts of at most `part_height`."""
    bottom = area["y"] + area["height"]
    return [
        {"x": area["x"], "y": top, "width": area["width"], "height": min(part_height, bottom - top)}
        for top in range(area["y"], bottom, part_height)
    ]


async def joined_png(page: Page, clips: list[dict[str, int]]) -> bytes:
    """The clips captured in order and joined into one PNG. Each part is
    decoded and compressed on a thread while the browser captures the next."""
    joiner = PngJoiner()
    captured = await page.screenshot(clip=clips[0], full_page=True, type="png")
    for clip in clips[1:]:
        captured, _ = await asyncio.gather(
            page.screenshot(clip=clip, full_page=True, type="png"), asyncio.to_thread(joiner.add, captured)
        )
    await asyncio.to_thread(joiner.add, captured)
    return await asyncio.to_thread(joiner.finish)


def image_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's or a JPEG's header. Read here, not by
    Pillow, whose decompression-bomb check refuses to open a tall page's PNG."""
    if data.startswith(PngJoiner.SIGNATURE):
        return struct.unpack(">II", data[16:24])  # IHDR, which comes first
    at = 2  # past the JPEG's SOI: segments up to the frame header (SOFn)
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xFF:  # a fill byte
            at += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + struct.unpack(">H", data[at + 2 : at + 4])[0]
    raise ValueError("the screenshot has no image header this reader knows")


class PngJoiner:
    """One PNG made of images stacked top to bottom, written as they come.

    Each part is decoded, then its rows go through one zlib stream a strip at
    a time, each row behind filter byte 0 (none: the Sub filter, computed
    with Pillow, made text-heavy screenshots larger, and the others cannot be
    computed fast in Python), so at most one decoded part is held, never the
    whole image. The header, which needs the
    total height, is written last, in front of the compressed rows.
    """

    SIGNATURE = b"\x89PNG\r\n\x1a\n"
    COLOUR_TYPES = {"RGB": 2, "RGBA": 6}
    STRIP_ROWS = 256
    IDAT_BYTES = 1024 * 1024
    # Level 6 made the 190,000 px test page's join take 7.4 s instead of 4.5 s
    # for a file a tenth smaller; the file is downloaded once.
    LEVEL = 3

    def __init__(self) -> None:
        self.width = 0
        self.height = 0
        self.mode = ""
        self.chunks: list[bytes] = []
        self.pending = bytearray()
        self.compressor = zlib.compressobj(self.LEVEL)

    def add(self, data: bytes) -> None:
        """Append one part (an encoded image) below the ones before it."""
        with Image.open(io.BytesIO(data)) as opened:
            if not self.mode:
                self.width = opened.width
                self.mode = "RGBA" if "A" in opened.getbands() or "transparency" in opened.info else "RGB"
            if opened.width != self.width:
                raise PluginError(502, f"A screenshot part came back {opened.width} px wide instead of {self.width}.")
            part = opened if opened.mode == self.mode else opened.convert(self.mode)
            stride = self.width * len(self.mode)
            for top in range(0, part.height, self.STRIP_ROWS):
                strip = part.crop((0, top, self.width, min(top + self.STRIP_ROWS, part.height))).tobytes()
                rows = b"".join(b"\x00" + strip[start : start + stride] for start in range(0, len(strip), stride))
                self._write(self.compressor.compress(rows))
            self.height += part.height

    def finish(self) -> bytes:
        """The whole PNG file."""
        self._write(self.compressor.flush(), last=True)
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, self.COLOUR_TYPES[self.mode], 0, 0, 0)
        return b"".join([self.SIGNATURE, chunk(b"IHDR", header), *self.chunks, chunk(b"IEND", b"")])

    def _write(self, compressed: bytes, last: bool = False) -> None:
        self.pending += compressed
        if len(self.pending) >= self.IDAT_BYTES or (last and self.pending):
            self.chunks.append(chunk(b"IDAT", bytes(self.pending)))
            self.pending.clear()


def chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data and the CRC of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# --- PDFs ------------------------------------------------------------------------------

PAPER_FORMATS = ["Letter", "Legal", "Tabloid", "Ledger", "A0", "A1", "A2", "A3", "A4", "A5", "A6"]
# "1-3, 5", "7-" (to the end), "-2" (the first two): page numbers from 1,
# with the ASCII spaces Chromium's parser trims around each number.
SPACE = "[ \\t\\n\\r\\f\\u000b]*"
PAGE = "0*[1-9][0-9]*"
PAGE_RANGE = f"{SPACE}(?:{PAGE}{SPACE}-{SPACE}(?:{PAGE})?|-{SPACE}{PAGE}|{PAGE}){SPACE}"
PAGE_RANGES = f"{PAGE_RANGE}(?:,{PAGE_RANGE})*"
LENGTH = re.compile(r"([0-9]{1,6}(?:\.[0-9]{1,4})?)(px|in|cm|mm)")
# A length as sent: LENGTH with spaces anywhere (they are dropped).
SENT_LENGTH = " *(?:[0-9] *){1,6}(?:\\. *(?:[0-9] *){1,4})?(?:p *x|i *n|c *m|m *m) *"
INCH = {"px": 96.0, "in": 1.0, "cm": 2.54, "mm": 25.4}
# PDF's own page size limit is 200 inches a side.
MAX_PAPER_INCHES = 200


def inches(value: str) -> float:
    number, unit = LENGTH.fullmatch(value).groups()
    return float(number) / INCH[unit]


class Length(Text):
    """A CSS length Chromium's printing takes: a number and px, in, cm or mm."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["help_text"] = " ".join(filter(None, [kwargs.get("help_text"), f"At most {MAX_PAPER_INCHES} in."]))
        super().__init__(max_length=20, pattern=SENT_LENGTH, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not re.fullmatch(SENT_LENGTH, value):
            raise serializers.ValidationError("must be a number and a unit: px, in, cm or mm (e.g. 210mm).")
        value = value.replace(" ", "")
        if inches(value) > MAX_PAPER_INCHES:
            raise serializers.ValidationError(f"must be at most {MAX_PAPER_INCHES} in.")
        return value


class Margin(serializers.Serializer):
    top = Length(required=False)
    right = Length(required=False)
    bottom = Length(required=False)
    left = Length(required=False)


class PdfParams(ReadParams):
    format = serializers.ChoiceField(choices=PAPER_FORMATS, required=False, help_text="Paper size; Letter when neither it nor width and height is given.")
    width = Length(required=False, help_text="Paper width, with height, instead of format; at least 1 in.")
    height = Length(required=False, help_text="Paper height, with width, instead of format; at least 1 in.")
    landscape = Flag(default=False)
    print_background = Flag(default=True)
    page_ranges = Text(
        max_length=1000,
        required=False,
        pattern=PAGE_RANGES,
        help_text='Pages to print, e.g. "1-3, 5", "4-" (to the end), "-2"; numbered from 1, a range not ending before it starts.',
    )
    scale = serializers.FloatField(min_value=0.1, max_value=2, default=1)
    margin = Margin(required=False)

    def validate_page_ranges(self, value: str) -> str:
        # The 0 a page number must not be is left to its own sentence.
        if not re.fullmatch(PAGE_RANGES.replace(PAGE, "[0-9]+"), value):
            raise serializers.ValidationError('must be page numbers and ranges separated by commas, e.g. "1-3, 5".')
        for part in value.split(","):
            first, dash, last = (piece.strip(" \t\n\r\f\v") for piece in part.partition("-"))
            if (first and int(first) == 0) or (last and int(last) == 0):
                raise serializers.ValidationError("pages are numbered from 1.")
            if first and last and int(first) > int(last):
                raise serializers.ValidationError(f"the range {part.strip()} ends before it starts.")
        return value

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("width" in data) != ("height" in data):
            raise serializers.ValidationError("give width and height together.")
        if "width" in data and "format" in data:
            raise serializers.ValidationError("give format or width and height, not both.")
        for side in ("width", "height"):
            if side in data and inches(data[side]) < 1:
                raise serializers.ValidationError(f"{side} must be at least 1 in.")
        return data


# Chromium's refusals of print settings that pass the checks above: the
# caller's to change (400), not the browser's failure (502).
PDF_REFUSALS = {
    "Page range exceeds page count": "page_ranges {ranges!r} names no page of this document: every range starts past its last page.",
    "content area is empty": "The margins leave no room on the paper for the page's content.",
}


@action("pdf", params=PdfParams)
async def pdf(page: Page, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await wait_for(page, params.get("wait_for"))
    options = {
        name: params[name]
        for name in ("format", "width", "height", "landscape", "print_background", "page_ranges", "scale", "margin")
        if name in params
    }
    if shows_error_page(page):
        raise no_document(ctx.page_id)
    try:
        data = await page.pdf(**options)
    except PlaywrightError as error:
        for refusal, sentence in PDF_REFUSALS.items():
            if refusal in (error.message or ""):
                raise PluginError(400, sentence.format(ranges=params.get("page_ranges", ""))) from None
        if await error_page_committing(page):  # a navigation failed just before: no document yet, nor to come
            raise no_document(ctx.page_id) from None
        raise
    if shows_error_page(page):  # committed while printing: what was printed is the browser's error page
        raise no_document(ctx.page_id)
    return {"media": await ctx.put_media(data, content_type="application/pdf", filename="page.pdf")}

