"""Tray icon images, drawn with Pillow (no image files to ship or lose).

A filled disc in the state's colour with a white double-helix-ish "H" on it.
The colours are distinct enough to tell apart at 16 px and in a screenshot.
"""

from __future__ import annotations

from functools import cache

from PIL import Image, ImageDraw

STATE_COLORS: dict[str, tuple[int, int, int]] = {
    "running": (34, 170, 85),     # green
    "starting": (240, 190, 20),   # amber (starting / restarting)
    "pressure": (235, 100, 20),   # orange: serving, but the GPU is contended
    "stopped": (128, 128, 128),   # grey
    "fatal": (210, 30, 40),       # red: crash loop, needs the user
}

STATE_LABELS = {
    "running": "running",
    "starting": "starting",
    "pressure": "GPU pressure",
    "stopped": "stopped",
    "fatal": "FATAL",
}


@cache
def make_icon(state: str, size: int = 64) -> Image.Image:
    color = STATE_COLORS.get(state, STATE_COLORS["stopped"])
    img = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    pad = max(1, size // 32)
    d.ellipse((pad, pad, size - 1 - pad, size - 1 - pad), fill=color + (255,))
    # the "H": two uprights and a bar
    w = max(2, size // 9)
    top, bottom = size * 0.26, size * 0.74
    left, right = size * 0.32, size * 0.68
    white = (255, 255, 255, 255)
    d.rectangle((left - w / 2, top, left + w / 2, bottom), fill=white)
    d.rectangle((right - w / 2, top, right + w / 2, bottom), fill=white)
    d.rectangle((left, size * 0.5 - w / 2, right, size * 0.5 + w / 2), fill=white)
    return img
