"""`convviz gallery --out DIR` writes the gallery, and the committed gallery/ is its output."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image, ImageSequence  # noqa: E402

from convviz.cli import main  # noqa: E402
from convviz.viz import gallery  # noqa: E402

COMMITTED = Path(__file__).resolve().parent.parent / "gallery"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gallery")
    assert main(["gallery", "--out", str(out), "--quiet"]) == 0
    return out


def _frames(path: Path) -> list[np.ndarray]:
    with Image.open(path) as image:
        return [np.asarray(frame.convert("RGB"), dtype=float) for frame in ImageSequence.Iterator(image)]


def test_gallery_writes_at_least_twelve_distinct_files(built):
    files = sorted(p for p in built.iterdir() if p.suffix in (".png", ".gif"))
    assert len(files) >= 12 and len(files) == len(gallery.ENTRIES)
    digests = {p.read_bytes() for p in files}
    assert len(digests) == len(files)  # all distinct
    assert sum(p.suffix == ".gif" for p in files) >= 2
    readme = (built / "README.md").read_text()
    for entry in gallery.ENTRIES:
        assert entry.name in readme and entry.lesson in readme
        assert f"]({entry.shown})" in readme  # the README shows the SVG of every figure
        if not entry.animated:
            assert entry.shown.endswith(".svg") and (built / entry.shown).exists()
            with Image.open(built / f"{entry.name}.png") as png:
                assert png.info["dpi"][0] >= 149  # PNGs at 150 dpi


def test_gallery_covers_the_cases_a_course_needs():
    names = " ".join(entry.name for entry in gallery.ENTRIES)
    for topic in ("valid_stride1", "same_stride1", "stride2_lost_row", "explicit_asymmetric", "checkerboard_k3_s2",
                  "even_overlap_k4_s2", "dilation2", "gridding_s2_d2", "scatter_vs_gather", "depthwise_tap",
                  "depthwise_multiplier2", "nhwc_vs_nchw"):
        assert topic in names


def test_committed_gallery_matches_what_the_command_draws(built):
    assert sorted(p.name for p in COMMITTED.iterdir()) == sorted(p.name for p in built.iterdir())
    assert (COMMITTED / "README.md").read_text() == (built / "README.md").read_text()
    for entry in gallery.ENTRIES:
        raster = entry.files[-1]  # the PNG of a figure, the GIF of an animation
        ours, theirs = _frames(COMMITTED / raster), _frames(built / raster)
        assert len(ours) == len(theirs), raster
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape, raster
            # Identical drawing; allow font rasterisation to differ by a few grey levels.
            assert np.mean(np.abs(a - b)) < 2.0, raster
        if not entry.animated:  # the SVG: same canvas, about the same drawing
            svg_ours, svg_theirs = ((d / entry.shown).read_text() for d in (COMMITTED, built))
            assert _svg_size(svg_ours) == _svg_size(svg_theirs), entry.shown
            assert abs(len(svg_ours) - len(svg_theirs)) < 0.02 * len(svg_ours), entry.shown


def _svg_size(svg: str) -> tuple[str, str]:
    import re

    return re.search(r'<svg[^>]*width="([^"]+)"[^>]*height="([^"]+)"', svg).groups()


def test_gallery_command_errors(capsys):
    with pytest.raises(SystemExit):
        main(["gallery"])  # --out is required
    with pytest.raises(SystemExit):
        main(["gallery", "--out", "x", "--only", "no_such.png"])
    assert "no gallery entries named ['no_such.png']" in capsys.readouterr().err


def test_only_accepts_entry_and_file_names(tmp_path):
    assert main(["gallery", "--out", str(tmp_path), "--quiet", "--only", "13_geometry_card,08_gridding_s2_d2.png"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "08_gridding_s2_d2.png", "08_gridding_s2_d2.svg", "13_geometry_card.png", "13_geometry_card.svg", "README.md"]
