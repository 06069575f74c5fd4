"""`gmlake replay --plot` as a browser draws it: headless Chromium renders the page of a shipped trace to a PNG,
which must show the chart (each policy's colour on many pixels, far more than one colour), not a blank page.
Exits 77 (ctest SKIP_RETURN_CODE) only when no Chromium binary exists. Run by ctest (label cpu) with GMLAKE_CLI and
GMLAKE_TRACES_DIR set; standard library only (the PNG is decoded here with zlib)."""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
WIDTH, HEIGHT = 1200, 800
# plot.cpp's colours per policy
POLICY_RGB = {"caching": (0xD6, 0x27, 0x28), "expandable": (0xFF, 0x7F, 0x0E), "gmlake": (0x1F, 0x5F, 0xBF)}
MIN_PIXELS_PER_POLICY = 300  # each curve runs across the plot, with its marker and legend swatch


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read_png(path):
    """(width, height, channels, rows of bytes) of an 8-bit RGB or RGBA PNG, non-interlaced."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"unexpected PNG format: depth {depth}, colour type {colour}, interlace {interlace}")
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(a, b, c)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("SKIP: no chromium binary (Debian: apt-get install chromium)")
        return SKIP
    cli, traces = os.environ["GMLAKE_CLI"], os.environ["GMLAKE_TRACES_DIR"]
    with tempfile.TemporaryDirectory() as tmp:
        html, png = os.path.join(tmp, "plot.html"), os.path.join(tmp, "plot.png")
        subprocess.run([cli, "replay", f"{traces}/gpt2_varlen.snapshot.pickle.xz", "--policy", "all", "--plot", html],
                       check=True, capture_output=True)
        done = subprocess.run([chromium, "--headless", "--disable-gpu", "--no-sandbox", f"--user-data-dir={tmp}/profile",
                               f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}", f"file://{html}"],
                              capture_output=True, text=True, timeout=180)
        if not os.path.exists(png):
            print(f"FAIL: chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}")
            return 1
        width, height, channels, rows = read_png(png)
    failures = []
    if (width, height) != (WIDTH, HEIGHT):
        failures.append(f"the screenshot is {width}x{height}, not {WIDTH}x{HEIGHT}")
    colours, near = set(), {p: 0 for p in POLICY_RGB}
    for row in rows:
        for x in range(0, len(row), channels):
            rgb = (row[x], row[x + 1], row[x + 2])
            colours.add(rgb)
            for policy, target in POLICY_RGB.items():
                if all(abs(v - t) <= 12 for v, t in zip(rgb, target)):
                    near[policy] += 1
    if len(colours) < 16:
        failures.append(f"{len(colours)} distinct colours: the page looks blank")
    for policy, count in near.items():
        if count < MIN_PIXELS_PER_POLICY:
            failures.append(f"{count} pixels in {policy}'s colour (at least {MIN_PIXELS_PER_POLICY} expected)")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"ok: {len(colours)} colours; pixels per policy colour: {near}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
