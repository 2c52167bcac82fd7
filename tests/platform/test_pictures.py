"""Pictures (issue 28): `detect --svg` and `fleet report --html` as XML, and in a real headless
Chromium (Debian's `chromium`): the screenshot holds the colours the page promises."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from cli_runner import cli_in_process

SVG = "{http://www.w3.org/2000/svg}"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _svg(capsys, tmp_path, root) -> tuple[str, ET.Element]:
    out = tmp_path / "topo.svg"
    rc, _, err = cli_in_process(capsys, "detect", "--root", str(root), "--svg", str(out))
    assert rc == 0, err
    text = out.read_text()
    return text, ET.fromstring(text)


def test_detect_svg_draws_gpus_nics_switches_and_the_mapping(capsys, tmp_path, host_tree):
    text, root = _svg(capsys, tmp_path, host_tree("h20-roce"))
    assert root.tag == f"{SVG}svg" and "<script" not in text
    groups = {g.get("class"): [] for g in root.iter(f"{SVG}g")}
    for g in root.iter(f"{SVG}g"):
        groups[g.get("class")].append(g)
    assert len(groups["gpu"]) == 8 and len(groups["nic"]) == 5
    assert {g.get("data-switch") for g in groups["switch"]} >= {"0000:0d:00.0", "0000:2b:00.0", "0000:8d:00.0", "0000:ab:00.0"}
    lines = {(ln.get("data-gpu"), ln.get("data-hca")) for ln in root.iter(f"{SVG}line")}
    assert lines == {("0", "mlx5_0"), ("1", "mlx5_0"), ("2", "mlx5_1"), ("3", "mlx5_1"), ("4", "mlx5_2"),
                     ("5", "mlx5_2"), ("6", "mlx5_3"), ("7", "mlx5_3")}        # the overlay's DEEP_EP_DEVICE_TO_HCA_MAPPING
    evidence = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "evidence"]
    assert evidence[0].startswith("platform h20-roce (detected)")
    assert any("DEEP_EP_DEVICE_TO_HCA_MAPPING=0:mlx5_0:1" in e for e in evidence)
    assert any("GPU0 0000:0f:00.0→mlx5_0 PIX" in e for e in evidence)


def test_detect_svg_marks_a_nic_without_a_usable_port(capsys, tmp_path, host_tree):
    _, root = _svg(capsys, tmp_path, host_tree("gcp-b200-port-down"))
    fills = {g.get("data-hca"): g.find(f"{SVG}rect").get("fill") for g in root.iter(f"{SVG}g") if g.get("class") == "nic"}
    assert list(fills.values()).count("#9e9e9e") == 1 and list(fills.values()).count("#1565c0") == 7


# -- a real browser ------------------------------------------------------------------------------

def _png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit, non-interlaced RGB/RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    pixels = []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        pixels += [tuple(line[x * bpp:x * bpp + 3]) for x in range(w)]
        prev = line
    return w, h, pixels


def _count(pixels, hex_colour: str, tol: int = 6) -> int:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(1 for p in pixels if abs(p[0] - r) <= tol and abs(p[1] - g) <= tol and abs(p[2] - b) <= tol)


def _screenshot(page: Path, out: Path, size: str = "1600,900") -> list:
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--screenshot={out}", f"--window-size={size}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert out.is_file(), proc.stderr[-2000:]
    return _png_pixels(out.read_bytes())[2]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
def test_pictures_in_headless_chromium(capsys, tmp_path, host_tree):
    from deepep_env.doctor import run_doctor

    # the fleet page: 3 nodes pass, one (a planted GID/NIC-naming difference) is odd
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i, name in enumerate(["gcp-b200", "gcp-b200", "gcp-b200-gid1", "gcp-b200"]):
        (fleet / f"node-{i}.json").write_text(json.dumps(run_doctor(None, root=str(host_tree(name)), environ={}).to_dict()))
    page = tmp_path / "fleet.html"
    rc, _, _ = cli_in_process(capsys, "fleet", "report", str(fleet), "--html", str(page))
    assert rc == 1
    px = _screenshot(page, tmp_path / "fleet.png")
    passed, odd, failed = _count(px, "#2e7d32"), _count(px, "#f9a825"), _count(px, "#c62828")
    assert odd > 500 and passed > 3 * 500                      # one odd cell, three passing cells drawn
    assert passed > 2.5 * odd
    # the topology picture
    _svg(capsys, tmp_path, host_tree("h20-roce"))
    px = _screenshot(tmp_path / "topo.svg", tmp_path / "topo.png")
    assert _count(px, "#76b900") > 8 * 2000                    # 8 GPU boxes
    assert _count(px, "#1565c0") > 5 * 2000                    # 5 NIC boxes
    assert _count(px, "#e65100", tol=40) > 8 * 20              # the mapping's lines
