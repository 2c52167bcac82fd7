"""`detect --svg` measures its text (issue 56): every caption lies inside the picture and inside its
box, by a character-width estimate wider than sans-serif fonts draw (0.7 em a character, 0.75 bold), and
an 8-GPU host fits a laptop window (~1280 px): the switch groups wrap, the evidence lines wrap."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from cli_runner import cli_in_process

SVG = "{http://www.w3.org/2000/svg}"


def _extent(t: ET.Element) -> tuple[float, float]:
    """(left, right) of a text element, over-approximated."""
    size = float(t.get("font-size") or 16)
    em = 0.75 if t.get("font-weight") == "bold" else 0.7
    x = float(t.get("x") or 0)
    return x, x + len(t.text or "") * size * em


@pytest.mark.parametrize("host", ["demo:h200x8-nvlink", "gcp-b200", "h20-roce"])
def test_svg_text_inside_width_and_boxes(host, capsys, tmp_path, host_tree):
    out = tmp_path / "topo.svg"
    where = ["--demo-host", host[5:]] if host.startswith("demo:") else ["--root", str(host_tree(host))]
    rc, _, err = cli_in_process(capsys, "detect", *where, "--svg", out)
    assert rc == 0, err
    root = ET.fromstring(out.read_text())
    width = float(root.get("width"))
    assert width <= 1280, width                                  # a laptop window, no sideways scrolling
    texts = list(root.iter(f"{SVG}text"))
    assert texts and all(t.text for t in texts)
    for t in texts:
        left, right = _extent(t)
        assert left >= 0 and right <= width, (t.text, right, width)
    for g in root.iter(f"{SVG}g"):                                  # a box's caption inside its box
        rect, t = g.find(f"{SVG}rect"), g.find(f"{SVG}text")
        left, right = _extent(t)
        assert right <= float(rect.get("x")) + float(rect.get("width")), (t.text, right)
    evidence = " ".join(t.text for t in texts if t.get("class") == "evidence")
    if host == "demo:h200x8-nvlink":                              # the captions the 2026-11-27 report saw clipped
        assert "no RDMA device under sys/class/infiniband" in evidence
