"""convviz.viz._save.save: figures with reproducible bytes; animations rendered once into GIF, HTML and MP4."""

import matplotlib

matplotlib.use("Agg")

import collections
import importlib.util
import json
import os
import re
import stat
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib import animation
from matplotlib.animation import FuncAnimation, PillowWriter
from PIL import Image

from convviz.viz import _render, _save
from convviz.viz._save import save

pytestmark = pytest.mark.filterwarnings("ignore:Animation was deleted without rendering anything")

GREY = (208, 208, 208)  # "#d0d0d0"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _animation(n=5, calls=None, *, size=(3.0, 2.0), busy=None):
    """A small FuncAnimation: a flat grey square, an image changing per frame, a title; calls counted.

    ``busy`` (a spread): every odd frame fills the image with noise around the grey, so the frame
    has thousands of colours (the case where per-frame GIF palettes move a flat colour).
    """
    calls = collections.Counter() if calls is None else calls
    fig = plt.figure(figsize=size)
    flat = fig.add_axes((0, 0, 0.04, 0.06))
    flat.set_axis_off()
    flat.add_patch(plt.Rectangle((0, 0), 1, 1, color=np.array(GREY) / 255))
    ax = fig.add_axes((0.06, 0, 0.94, 0.85))
    ax.set_axis_off()
    rng = np.random.default_rng(0)
    image = ax.imshow(np.zeros((8, 8)), cmap="viridis", vmin=0, vmax=n, interpolation="nearest")
    title = fig.suptitle("")

    def init():
        calls["init"] += 1
        image.set_data(np.zeros((8, 8)))
        title.set_text("start")
        return image, title

    def draw(frame):
        calls[frame] += 1
        if busy and frame % 2:
            image.set_data(np.clip(GREY[0] / 255 + busy * rng.standard_normal((80, 80, 3)), 0, 1))
        else:
            data = np.zeros((8, 8))
            data.flat[: frame + 1] = frame + 1
            image.set_data(data)
        title.set_text(f"frame {frame}")
        return image, title

    return FuncAnimation(fig, draw, frames=n, init_func=init, interval=100), calls


def _gif_frames(path):
    with Image.open(path) as gif:
        frames, durations = [], []
        for k in range(gif.n_frames):
            gif.seek(k)
            frames.append(np.asarray(gif.convert("RGB")))
            durations.append(gif.info["duration"])
    return frames, durations


def _gif_colour_tables(data: bytes) -> tuple[bool, int]:
    """(has a global colour table, number of local colour tables) of a GIF file's bytes."""
    assert data[:6] in (b"GIF87a", b"GIF89a")
    packed = data[10]
    pos = 13 + (3 * 2 ** ((packed & 7) + 1) if packed & 0x80 else 0)
    local = 0
    while data[pos] != 0x3B:  # trailer
        if data[pos] == 0x21:  # extension: label, then sub-blocks
            pos += 2
        else:
            assert data[pos] == 0x2C  # image descriptor
            flags = data[pos + 9]
            pos += 10
            if flags & 0x80:
                local += 1
                pos += 3 * 2 ** ((flags & 7) + 1)
            pos += 1  # LZW minimum code size
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    return bool(packed & 0x80), local


_NETWORK = re.compile(r"""(?:\b(?:src|href)\s*=\s*["']?|url\(\s*["']?|@import\s+["']?)\s*(?:https?:)?//""",
                      re.IGNORECASE)


# ----------------------------------------------------------------------------------- animations

def test_gif_and_html_together_render_every_frame_once(tmp_path):
    anim, calls = _animation(6)
    gif, page = save(anim, tmp_path / "a.gif", tmp_path / "sub" / "a.html", progress=False)
    assert (gif, page) == (tmp_path / "a.gif", tmp_path / "sub" / "a.html")
    assert calls == {"init": 1, **{k: 1 for k in range(6)}}  # matplotlib's saves: 2 inits, every frame twice
    frames, _ = _gif_frames(gif)
    assert len(frames) == 6
    assert page.read_text(encoding="utf-8").count("data:image/png;base64,") == 6
    assert not plt.fignum_exists(anim._fig.number)  # the animation's figure is closed, as before


def test_gif_shares_one_palette_so_flat_colours_stay_put(tmp_path):
    anim, _ = _animation(4, busy=0.3)
    path = save(anim, tmp_path / "a.gif", progress=False)
    frames, _ = _gif_frames(path)
    corner = [tuple(int(v) for v in f[-3, 3]) for f in frames]  # inside the flat grey square
    assert corner == [GREY] * 4  # the same, and exact, in every frame
    assert _gif_colour_tables(path.read_bytes()) == (True, 0)  # one global palette, no local ones
    # The fault this guards against: matplotlib's PillowWriter lets Pillow quantise each frame to its
    # own palette, and in the frames with thousands of colours the flat grey moves.
    anim, _ = _animation(4, busy=0.3)
    anim.save(tmp_path / "pillow.gif", writer=PillowWriter(fps=4), dpi=100)
    frames, _ = _gif_frames(tmp_path / "pillow.gif")
    moved = [tuple(int(v) for v in f[-3, 3]) for f in frames]
    assert moved[0] == GREY and any(c != GREY for c in moved[1:])


def test_global_palette_is_exact_for_few_colours_and_keeps_frequent_colours_exactly():
    rng = np.random.default_rng(1)
    few = [np.full((4, 4, 3), c, np.uint8) for c in (10, 20, 30)]
    palette, indexed = _save._global_palette(few)
    assert [palette[i[0, 0]].tolist() for i in indexed] == [[10] * 3, [20] * 3, [30] * 3]
    many = [rng.integers(0, 256, (60, 60, 3), dtype=np.uint8) for _ in range(3)]
    for f in many:
        f[:20, :20] = GREY  # a flat colour among 10 000 others
    palette, indexed = _save._global_palette(many)
    assert len(palette) <= 256
    assert {tuple(palette[i].tolist()) for f in indexed for i in np.unique(f[:20, :20])} == {GREY}
    error = np.abs(palette[indexed[0]].astype(int) - many[0]).mean()
    assert error < 40  # a palette, not noise (random colours: about 85)


def test_gif_durations_are_the_interval_then_the_hold(tmp_path):
    anim, _ = _animation(4)
    _, durations = _gif_frames(save(anim, tmp_path / "a.gif", fps=4, hold=1.5, progress=False))
    assert durations == [250, 250, 250, 1500]
    anim, _ = _animation(3)
    _, durations = _gif_frames(save(anim, tmp_path / "b.gif", fps=5, hold=0, progress=False))
    assert durations == [200, 200, 200]  # no hold: the last frame lasts one interval


def test_html_player_is_offline_and_accessible(tmp_path):
    anim, _ = _animation(5)
    page = save(anim, tmp_path / "a.htm", fps=4, hold=2, progress=False, metadata={"Title": "demo <1>"})
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<title>demo &lt;1&gt;</title>" in html
    assert _NETWORK.findall(html) == [] and "http" not in html
    for planted in ('<link rel="stylesheet" href="https://cdn.example/x.css">', "<img src='//cdn.example/a.png'>",
                    "<style>@import url(https://x.example/f.css); b { background: url( //x.example/i.png) }</style>",
                    '<script src="http://x.example/lib.js"></script>'):
        assert _NETWORK.findall(planted)  # the check finds what it is for
    assert html.count("data:image/png;base64,") == 5
    assert len(re.findall(r"<img [^>]*\bhidden>", html)) == 4  # one frame shown, the others hidden
    buttons = re.findall(r'<button type="button" id="(\w+)" title="([^"]+)" aria-label="([^"]+)">([^<]+)</button>',
                         html)
    assert [(b[0], b[2]) for b in buttons] == [("first", "first frame"), ("back", "step back"), ("play", "play"),
                                               ("step", "step"), ("last", "last frame")]
    assert all(title == label and glyph.strip() for _, title, label, glyph in buttons)
    assert re.search(r'<input type="range" id="slider" min="1" max="5"[^>]*aria-label="frame"', html)
    assert ">frame 1 / 5</output>" in html
    sizes = [int(v) for v in re.findall(r"font-size:\s*(\d+)px", html)] + [int(v) for v in re.findall(
        r"font:\s*(\d+)px", html)]
    assert sizes and min(sizes) >= 16
    script = html.split("<script>")[1]
    assert "prefers-reduced-motion: reduce" in script and "INTERVAL = 250, HOLD = 2000" in script
    assert all(key in script for key in ('" "', "ArrowRight", "ArrowLeft", "Home", "End"))


def test_errors_come_before_any_drawing(tmp_path, monkeypatch):
    anim, calls = _animation(3)
    with pytest.raises(ValueError, match="an animation is written as .gif, .mp4, .html, .htm, got '.avi'"):
        save(anim, tmp_path / "a.gif", tmp_path / "a.avi", progress=False)
    with pytest.raises(ValueError, match="an animation is written as .gif, .mp4, .html, .htm, got '.png'"):
        save(anim, tmp_path / "a.png", progress=False)
    monkeypatch.setattr(animation.writers, "is_available", lambda name: False)
    with pytest.raises(RuntimeError, match="ffmpeg"):
        save(anim, tmp_path / "a.gif", tmp_path / "a.mp4", progress=False)
    with pytest.raises(ValueError, match="fps must be a positive number, got 0"):
        save(anim, tmp_path / "a.gif", fps=0, progress=False)
    with pytest.raises(ValueError, match="hold must be a number of seconds >= 0, got -1"):
        save(anim, tmp_path / "a.gif", hold=-1, progress=False)
    assert calls == {} and list(tmp_path.iterdir()) == []  # nothing drawn, nothing written
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="a figure is written as .png, .svg, .pdf, got '.gif'"):
        save(fig, tmp_path / "c.png", tmp_path / "c.gif")
    with pytest.raises(TypeError, match="save writes a matplotlib Figure or Animation, got list"):
        save([], tmp_path / "c.png")
    assert list(tmp_path.iterdir()) == []


def _fake_ffmpeg(folder, exit_code=0):
    """A stand-in for ffmpeg: reads the piped frames and writes what it got, as JSON, to the output file."""
    folder.mkdir(exist_ok=True)
    script = folder / "fake-ffmpeg"
    script.write_text(f"#!{sys.executable}\n"
                      "import json, sys\n"
                      "data = sys.stdin.buffer.read()\n"
                      f"if {exit_code}:\n"
                      "    sys.stderr.write('fake ffmpeg: no encoder'); sys.exit(1)\n"
                      "open(sys.argv[-1], 'w').write(json.dumps({'args': sys.argv[1:], 'bytes': len(data)}))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.skipif(os.name == "nt", reason="the fake ffmpeg is a script with a #! line")
def test_mp4_pipes_the_rendered_frames_to_ffmpeg_with_the_hold(tmp_path, monkeypatch):
    monkeypatch.setattr(animation.writers, "is_available", lambda name: True)
    monkeypatch.setitem(matplotlib.rcParams, "animation.ffmpeg_path", str(_fake_ffmpeg(tmp_path / "bin")))
    anim, calls = _animation(4, size=(1.01, 0.71))  # 101 x 71 pixels: padded to even sizes
    mp4, gif = save(anim, tmp_path / "a.mp4", tmp_path / "a.gif", fps=4, hold=1.5, progress=False,
                    metadata={"title": "t"})
    record = json.loads(mp4.read_text())
    args = record["args"]
    assert args[args.index("-s") + 1] == "102x72" and args[args.index("-framerate") + 1] == "4/1"
    assert "title=t" in args and args[-1] == str(mp4)
    assert record["bytes"] == 102 * 72 * 3 * (3 + 6)  # 3 frames, then the last one round(1.5 * 4) times
    assert calls == {"init": 1, 0: 1, 1: 1, 2: 1, 3: 1} and gif.exists()
    monkeypatch.setitem(matplotlib.rcParams, "animation.ffmpeg_path", str(_fake_ffmpeg(tmp_path / "failing", 1)))
    anim, _ = _animation(2)
    with pytest.raises(RuntimeError, match="fake ffmpeg: no encoder"):
        save(anim, tmp_path / "b.mp4", progress=False)


@pytest.mark.skipif(not animation.writers.is_available("ffmpeg"), reason="ffmpeg is not installed")
def test_mp4_with_real_ffmpeg(tmp_path):
    anim, _ = _animation(3)
    assert save(anim, tmp_path / "a.mp4", progress=False).stat().st_size > 0


def test_progress_bar_is_tqdm_on_request_and_quiet_otherwise(tmp_path, capsys):
    anim, _ = _animation(4)
    save(anim, tmp_path / "a.gif", progress=False)
    assert capsys.readouterr().err == ""
    anim, _ = _animation(4)
    save(anim, tmp_path / "b.gif", progress=None)  # the default: a bar only on a terminal
    assert capsys.readouterr().err == ""
    anim, _ = _animation(4)
    save(anim, tmp_path / "c.gif", tmp_path / "c.html", progress=True)
    err = capsys.readouterr().err
    assert "c.gif, c.html" in err and "4/4" in err and "frame/s" in err


def test_layout_settles_so_a_still_animation_does_not_jitter():
    def still():
        fig, (a, b) = plt.subplots(1, 2, figsize=(4, 2), layout="constrained")
        image = a.imshow(np.arange(12.0).reshape(3, 4))
        fig.colorbar(image, ax=a)
        b.set_title("a title")
        fig.suptitle("a still animation")
        return FuncAnimation(fig, lambda i: (image,), frames=3)

    frames = list(_save._render(still(), 100))
    assert all(np.array_equal(frames[0], f) for f in frames[1:])
    # The fault: drawn once per frame, constrained layout is still converging over the first frames.
    anim = still()
    fig = anim._fig
    with _render.agg_canvas(fig, 100) as canvas:
        anim._init_draw()
        once = []
        for data in anim.new_saved_frame_seq():
            anim._draw_next_frame(data, blit=False)
            canvas.draw()
            once.append(np.asarray(canvas.buffer_rgba()).copy())
    assert not np.array_equal(once[0], once[1])


def test_blitting_and_artist_animations_are_drawn_whole(tmp_path):
    def dark_columns(frame):
        return int(np.nonzero((frame < 100).all(axis=2))[1].mean())

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.set_xlim(-1, 4)
    ax.set_axis_off()
    dot, = ax.plot([0], [0], "ks", ms=10)
    blitting = FuncAnimation(fig, lambda i: (dot.set_xdata([i]), dot)[1:], frames=4, blit=True)
    frames = list(_save._render(blitting, 50))
    assert np.all(np.diff([dark_columns(f) for f in frames]) > 0)  # the animated artist is in every frame
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.set_xlim(-1, 4)
    ax.set_axis_off()
    artists = animation.ArtistAnimation(fig, [ax.plot([i], [0], "ks", ms=10) for i in range(3)])
    frames = list(_save._render(artists, 50))
    assert len(frames) == 3 and np.all(np.diff([dark_columns(f) for f in frames]) > 0)


def test_convviz_animation_smoke(tmp_path):
    from convviz.viz import Setup, animate_input_gradient

    anim = animate_input_gradient(Setup(input_hw=5, kernel_hw=3, strides=2))
    n = anim._save_count
    gif, page = save(anim, tmp_path / "dx.gif", tmp_path / "dx.html", progress=False)
    frames, durations = _gif_frames(gif)
    assert len(frames) == n and durations[-1] == 2500
    assert page.read_text(encoding="utf-8").count("data:image/png;base64,") == n


# -------------------------------------------------------------------------------------- figures

def test_figures_are_written_by_extension_with_reproducible_bytes(tmp_path):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.imshow(np.arange(6.0).reshape(2, 3))
    ax.set_title("reproducible")
    first = save(fig, tmp_path / "1" / "c.png", tmp_path / "1" / "c.svg", tmp_path / "1" / "c.pdf")
    again = save(fig, tmp_path / "2" / "c.png", tmp_path / "2" / "c.svg", tmp_path / "2" / "c.pdf")
    assert [p.name for p in first] == ["c.png", "c.svg", "c.pdf"]
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    assert plt.fignum_exists(fig.number)  # left open: the caller may still show it
    with Image.open(first[0]) as png:
        assert png.info["dpi"][0] >= 149 and "Software" not in png.info
    svg = first[1].read_text()
    assert svg.lstrip().startswith("<?xml") and "<dc:date>" not in svg
    assert first[2].read_bytes().startswith(b"%PDF") and b"/CreationDate" not in first[2].read_bytes()
    single = save(fig, tmp_path / "one.png", dpi=50, metadata={"Title": "t"})
    assert isinstance(single, Path)
    with Image.open(single) as png:
        assert png.info["Title"] == "t" and round(png.info["dpi"][0]) == 50
    # Without the fixed hash salt, matplotlib's SVG ids are random: the bytes change every save.
    fig.savefig(tmp_path / "x.svg")
    fig.savefig(tmp_path / "y.svg")
    assert (tmp_path / "x.svg").read_bytes() != (tmp_path / "y.svg").read_bytes()


# -------------------------------------------------------------------------------------- browser

_CHROMIUM = "/usr/bin/chromium"


@pytest.mark.skipif(not (os.path.exists(_CHROMIUM) and importlib.util.find_spec("playwright")),
                    reason="needs Chromium at /usr/bin/chromium and the playwright package")
def test_html_player_in_chromium(tmp_path):
    from playwright.sync_api import sync_playwright

    anim, _ = _animation(5)
    page_path = save(anim, tmp_path / "player.html", fps=10, hold=0.5, progress=False)
    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(reduced_motion="reduce")

            def route(r):
                requests.append(r.request.url)
                r.abort() if not r.request.url.startswith(("file:", "data:")) else r.continue_()

            context.route("**/*", route)
            page = context.new_page()
            page.on("request", lambda req: requests.append(req.url))
            page.goto(page_path.as_uri())
            readout = page.locator("#readout")
            assert readout.inner_text() == "frame 1 / 5"  # reduced motion: no autoplay
            page.click("#step")
            assert readout.inner_text() == "frame 2 / 5"
            assert page.locator("#frames img:not([hidden])").get_attribute("alt") == "frame 2 of 5"
            page.keyboard.press("End")
            assert readout.inner_text() == "frame 5 / 5"
            page.click("#first")
            page.keyboard.press("ArrowRight")
            assert readout.inner_text() == "frame 2 / 5"
            page.click("#last")
            assert readout.inner_text() == "frame 5 / 5" and page.locator("#slider").input_value() == "5"
            page.evaluate("document.activeElement.blur()")  # on a focused button, space presses that button
            page.keyboard.press("Space")  # play: from the last frame it starts again at the first
            assert page.locator("#play").get_attribute("aria-label") == "pause"
            page.wait_for_function("document.getElementById('readout').textContent !== 'frame 1 / 5'")
            page.keyboard.press("Space")
            assert page.locator("#play").get_attribute("aria-label") == "play"
            # Without the reduced-motion preference it plays on opening.
            moving = browser.new_context().new_page()
            moving.goto(page_path.as_uri())
            assert moving.locator("#play").get_attribute("aria-label") == "pause"
            moving.wait_for_function("document.getElementById('readout').textContent === 'frame 3 / 5'")
        finally:
            browser.close()
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
