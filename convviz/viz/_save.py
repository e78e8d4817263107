"""Write figures and animations to files: PNG/SVG/PDF, and GIF/HTML/MP4 from one render.

:func:`save` is the one entry point.  A figure is written with reproducible
bytes (no timestamps, fixed SVG ids), so generated files can be committed and
compared.  An animation is rendered once, frame by frame, into RGB arrays; every
requested file is then written from those arrays:

* ``.gif`` -- one global palette for all frames (so a flat colour is the same
  colour in every frame), the final frame held for ``hold`` seconds, looping;
* ``.html`` / ``.htm`` -- one self-contained page with a small offline player
  (buttons, slider, keyboard) that loads nothing from the network;
* ``.mp4`` -- the frames piped to ffmpeg.

matplotlib's own ``Animation.save`` draws every frame three times (the
animation's idle redraw, the layout pass and the print) and once more per extra
file; here each frame is drawn once in all.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Generator, Sequence
from contextlib import ExitStack, closing
from fractions import Fraction
from pathlib import Path
from typing import IO, overload

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import animation
from matplotlib.figure import Figure
from PIL import Image
from tqdm import tqdm

from ._render import agg_canvas, draw_settled, layout_frozen

__all__ = ["ANIMATION_FORMATS", "FIGURE_FORMATS", "save", "to_html"]

FIGURE_FORMATS = (".png", ".svg", ".pdf")
ANIMATION_FORMATS = (".gif", ".mp4", ".html", ".htm")
_HTML = (".html", ".htm")
_SVG_HASHSALT = "convviz"


@overload
def save(obj: Figure | animation.Animation, path: str | os.PathLike[str], *, fps: float = 3,
         dpi: float | None = None, progress: bool | None = None, hold: float = 2.5,
         metadata: dict[str, str | None] | None = None) -> Path: ...
@overload
def save(obj: Figure | animation.Animation, path: str | os.PathLike[str], second_path: str | os.PathLike[str], /,
         *more_paths: str | os.PathLike[str], fps: float = 3, dpi: float | None = None,
         progress: bool | None = None, hold: float = 2.5,
         metadata: dict[str, str | None] | None = None) -> list[Path]: ...
def save(obj: Figure | animation.Animation, path: str | os.PathLike[str], *more_paths: str | os.PathLike[str],
         fps: float = 3, dpi: float | None = None, progress: bool | None = None, hold: float = 2.5,
         metadata: dict[str, str | None] | None = None) -> Path | list[Path]:
    """Write a figure or an animation to one or more files, the format taken from each extension.

    Parameters
    ----------
    obj : matplotlib.figure.Figure or matplotlib.animation.Animation
        What to write.
    path, *more_paths : str or os.PathLike
        Where to write it; missing folders are created.  A figure is written as
        ``.png``, ``.svg`` or ``.pdf``; an animation as ``.gif``, ``.mp4``,
        ``.html`` or ``.htm``.  An animation is rendered once however many files
        are asked for (``save(anim, "a.gif", "a.html")``).
    fps : float, default 3
        Animations: frames per second; every frame but the last lasts ``1 / fps`` s.
    dpi : float, optional
        Resolution: 150 for figures (PNG pixels, and images embedded in SVG and
        PDF), 100 for animations (an 8 x 4 inch figure gives 800 x 400 frames).
    progress : bool, optional
        Animations: show a tqdm bar over the frames, labelled with the file
        names.  The default shows it only when stderr is a terminal.
    hold : float, default 2.5
        Animations: seconds the last frame stays up before the animation loops
        (GIF, the HTML player) or ends (MP4, where the last frame is repeated
        ``round(hold * fps)`` times).  0 means no hold: the last frame lasts one
        interval like the others.
    metadata : dict, optional
        Figures: passed to ``savefig`` (keys such as ``"Title"``, ``"Author"``)
        over the defaults that keep the bytes reproducible (no ``Software`` in
        PNG, no ``Date`` in SVG, no ``CreationDate`` in PDF).  Animations:
        ``"title"`` becomes the HTML page title (the file name's stem
        otherwise) and other keys ``<meta name=...>`` tags; ``"comment"`` (or
        else ``"title"``) is the GIF comment; all go to ffmpeg for MP4.  Keys
        are matched without regard to case; ``None`` values are left out.

    Returns
    -------
    pathlib.Path or list of pathlib.Path
        The file written, or the files when more than one path was given.

    Raises
    ------
    TypeError
        For an object that is neither a figure nor an animation.
    ValueError
        For an extension the object cannot be written as, or a non-positive
        ``fps`` or ``dpi``, or a negative ``hold``.
    RuntimeError
        For ``.mp4`` when ffmpeg is not installed, or when ffmpeg fails.

    Notes
    -----
    Every check (types, extensions, ffmpeg) is made before anything is drawn.
    A figure is left open (it may still be shown); an animation's figure is
    closed once written.  Frames are drawn the way ``Animation.save`` draws
    them (the init function, then each frame of ``new_saved_frame_seq``) on an
    Agg canvas, with any ``facecolor`` transparency composited onto white.  A
    GIF frame identical to the one before it is merged into it by Pillow (its
    time added), so such a GIF has fewer frames but the same timing.  The
    frames of a GIF are held in memory until all are drawn (the palette is
    shared), 3 bytes a pixel; HTML frames are kept as PNG, MP4 frames are
    streamed to ffmpeg.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import matplotlib.pyplot as plt
    >>> from matplotlib.animation import FuncAnimation
    >>> fig, ax = plt.subplots(figsize=(2, 1))
    >>> dot, = ax.plot([0], [0], "o")
    >>> ax.set_xlim(-0.5, 3.5)
    (-0.5, 3.5)
    >>> anim = FuncAnimation(fig, lambda i: dot.set_xdata([i]), frames=4)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     gif, page = save(anim, pathlib.Path(folder) / "dot.gif", pathlib.Path(folder) / "dot.html",
    ...                      fps=4, hold=1, progress=False)
    ...     with Image.open(gif) as image:
    ...         durations = [image.seek(k) or image.info["duration"] for k in range(image.n_frames)]
    ...     html = page.read_text(encoding="utf-8")
    >>> durations  # 1 / fps each, then the hold
    [250, 250, 250, 1000]
    >>> html.count("data:image/png;base64,"), "frame 1 / 4" in html
    (4, True)

    A figure, as two files with reproducible bytes:

    >>> fig, ax = plt.subplots(figsize=(2, 1))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     first = [p.read_bytes() for p in save(fig, f"{folder}/f.svg", f"{folder}/f.png")]
    ...     again = [p.read_bytes() for p in save(fig, f"{folder}/f.svg", f"{folder}/f.png")]
    >>> first == again
    True
    >>> plt.close("all")
    """
    paths = [Path(p) for p in (path, *more_paths)]
    metadata = dict(metadata or {})
    if isinstance(obj, Figure):
        for p in paths:
            _check_suffix(p, FIGURE_FORMATS, "a figure")
        dpi = 150 if dpi is None else _positive(dpi, "dpi")
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            _save_figure(obj, p, dpi, metadata)
    elif isinstance(obj, animation.Animation):
        for p in paths:
            _check_suffix(p, ANIMATION_FORMATS, "an animation")
        if any(p.suffix.lower() == ".mp4" for p in paths) and not animation.writers.is_available("ffmpeg"):
            raise RuntimeError("writing .mp4 needs ffmpeg on the PATH; save as .gif or .html instead")
        fps = _positive(fps, "fps")
        dpi = 100 if dpi is None else _positive(dpi, "dpi")
        if not (isinstance(hold, (int, float)) and math.isfinite(hold) and hold >= 0):
            raise ValueError(f"hold must be a number of seconds >= 0, got {hold!r}")
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
        _save_animation(obj, paths, fps=fps, dpi=dpi, progress=progress, hold=hold, metadata=metadata)
        plt.close(_figure_of(obj))
    else:
        raise TypeError(f"save writes a matplotlib Figure or Animation, got {type(obj).__name__}")
    return paths[0] if len(paths) == 1 else paths


def to_html(anim: animation.Animation, *, fps: float = 3, dpi: float = 100, hold: float = 2.5,
            progress: bool | None = None) -> str:
    """An animation as HTML for a notebook cell: the offline player of :func:`save`, in an ``<iframe>``.

    Use it instead of matplotlib's ``anim.to_jshtml()``, whose buttons load Font
    Awesome from a CDN (blank offline).  The player sits in an ``iframe``'s
    ``srcdoc``, so several players on one page keep their own controls and
    styles; it loads nothing from the network.

    Examples
    --------
    >>> from convviz.viz import Setup, animate_input_gradient, to_html
    >>> html = to_html(animate_input_gradient(Setup(input_hw=4, kernel_hw=2, strides=2)), progress=False)
    >>> html.startswith("<iframe") and "srcdoc=" in html
    True
    >>> from IPython.display import HTML
    >>> HTML(html)  # doctest: +SKIP
    """
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "player.html"
        save(anim, path, fps=fps, dpi=dpi, hold=hold, progress=progress)
        page = path.read_text(encoding="utf-8")
    fig = _figure_of(anim)
    width, height = fig.get_figwidth() * dpi, fig.get_figheight() * dpi
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" title="animation player" '
            f'style="border:0;width:{round(width) + 24}px;max-width:100%;height:{round(height) + 110}px"></iframe>')


def _figure_of(anim: animation.Animation) -> Figure:
    """The figure an animation draws on (matplotlib keeps it private, as ``_fig``)."""
    fig: Figure = anim._fig  # type: ignore[attr-defined]  # private attribute, not in matplotlib's stubs
    return fig


def _check_suffix(path: Path, allowed: tuple[str, ...], what: str) -> None:
    suffix = path.suffix.lower()
    if suffix not in allowed:
        raise ValueError(f"{what} is written as {', '.join(allowed)}, got {suffix!r}")


def _positive(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return value


# --------------------------------------------------------------------------------------- figures

def _save_figure(fig: Figure, path: Path, dpi: float, metadata: dict) -> None:
    """One figure file with reproducible bytes: no creation date, no software stamp, fixed SVG ids."""
    suffix = path.suffix.lower()
    if suffix == ".png":
        fig.savefig(path, dpi=dpi, metadata={"Software": None, **metadata})
    elif suffix == ".svg":
        with mpl.rc_context({"svg.hashsalt": _SVG_HASHSALT}):
            fig.savefig(path, dpi=dpi, metadata={"Date": None, **metadata})
    else:
        fig.savefig(path, dpi=dpi, metadata={"CreationDate": None, **metadata})


# ------------------------------------------------------------------------------------ animations

def _lookup(metadata: dict, key: str) -> str | None:
    for k, v in metadata.items():
        if k.lower() == key and v is not None:
            return str(v)
    return None


def _save_animation(anim: animation.Animation, paths: list[Path], *, fps: float, dpi: float,
                    progress: bool | None, hold: float, metadata: dict) -> None:
    interval = 1 / fps
    last = hold if hold > 0 else interval
    suffixes = [p.suffix.lower() for p in paths]
    keep_rgb = ".gif" in suffixes
    keep_png = any(s in _HTML for s in suffixes)
    movies = [_Movie(p, fps, round(last * fps), metadata) for p, s in zip(paths, suffixes) if s == ".mp4"]
    rgb_frames: list[np.ndarray] = []
    png_frames: list[bytes] = []
    shape: tuple[int, ...] | None = None
    n_frames = 0
    bar = tqdm(total=getattr(anim, "_save_count", None), desc=", ".join(p.name for p in paths), unit="frame",
               file=sys.stderr, disable=None if progress is None else not progress, leave=True)
    try:
        with bar, closing(_render(anim, dpi)) as rendered:
            for frame in rendered:
                if shape is None:
                    shape = frame.shape
                elif frame.shape != shape:
                    raise ValueError(f"frame {n_frames + 1} is {frame.shape[1]}x{frame.shape[0]} pixels, the first "
                                     f"was {shape[1]}x{shape[0]}: the figure changed size during the animation")
                n_frames += 1
                if keep_rgb:
                    rgb_frames.append(frame)
                if keep_png:
                    png_frames.append(_png(frame))
                for movie in movies:
                    movie.add(frame)
                bar.update()
        for movie in movies:
            movie.finish()
    except BaseException:
        for movie in movies:
            movie.abort()
        raise
    if not n_frames:
        raise ValueError("the animation has no frames to save")
    durations_ms = [round(1000 * interval)] * (n_frames - 1) + [round(1000 * last)]
    for p, suffix in zip(paths, suffixes):
        if suffix == ".gif":
            _write_gif(p, rgb_frames, durations_ms, comment=_lookup(metadata, "comment") or _lookup(metadata, "title"))
        elif suffix in _HTML:
            page = _player_html(png_frames, interval_ms=1000 * interval, hold_ms=1000 * last,
                                title=_lookup(metadata, "title") or p.stem, metadata=metadata)
            p.write_text(page, encoding="utf-8")


def _render(anim: animation.Animation, dpi: float) -> Generator[np.ndarray, None, None]:
    """Each frame of the animation as an opaque (height, width, 3) uint8 array, drawn once.

    The frames are those ``Animation.save`` would write: the init function (or
    the first frame) is drawn first, then every item of ``new_saved_frame_seq``,
    each by one call of the animation's function.  A figure with a layout
    engine is laid out on the first frame until its layout has settled (see
    :func:`~convviz.viz._render.draw_settled`), and that layout is kept for every later frame: the
    panels do not jitter, and the layout (half of a frame's drawing time) is
    computed once.
    """
    fig = _figure_of(anim)
    with agg_canvas(fig, dpi) as canvas, ExitStack() as frozen:
        anim._init_draw()  # type: ignore[attr-defined]  # private method, not in matplotlib's stubs
        for index, data in enumerate(anim.new_saved_frame_seq()):
            anim._draw_next_frame(data, blit=False)  # type: ignore[attr-defined]  # private, as _init_draw
            if index == 0:
                draw_settled(fig, canvas)
                frozen.enter_context(layout_frozen(fig))  # keep the settled positions
            else:
                canvas.draw()
            yield _opaque(np.asarray(canvas.buffer_rgba()))


def _opaque(rgba: np.ndarray) -> np.ndarray:
    """RGB of an RGBA image, composited onto white where it is not opaque.

    Examples
    --------
    >>> _opaque(np.array([[[10, 20, 30, 255], [0, 0, 0, 0], [0, 0, 0, 128]]], np.uint8)).tolist()
    [[[10, 20, 30], [255, 255, 255], [127, 127, 127]]]
    """
    alpha = rgba[..., 3:]
    if alpha.min() == 255:
        return rgba[..., :3].copy()
    a = alpha.astype(np.uint32)
    return ((rgba[..., :3] * a + 255 * (255 - a) + 127) // 255).astype(np.uint8)


def _png(frame: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="png", compress_level=3)
    return buffer.getvalue()


# -------------------------------------------------------------------------------------------- GIF

def _pack(rgb: np.ndarray) -> np.ndarray:
    """24-bit colour codes 0xRRGGBB of an (..., 3) uint8 array."""
    rgb = rgb.astype(np.uint32)
    return (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]


def _unpack(codes: np.ndarray) -> np.ndarray:
    codes = np.asarray(codes, np.uint32)
    return np.stack([(codes >> 16) & 255, (codes >> 8) & 255, codes & 255], axis=-1).astype(np.uint8)


def _global_palette(frames: Sequence[np.ndarray], *, sample_size: int = 400_000,
                    max_exact: int = 160) -> tuple[np.ndarray, list[np.ndarray]]:
    """One palette of at most 256 colours for all frames, and each frame as indices into it.

    Every colour of every frame is mapped to its nearest palette colour by one
    lookup table, so a colour is the same palette entry in every frame.  When
    the frames use 256 colours or fewer the palette is exactly those colours.
    Otherwise the colours covering the most pixels (flat fills, backgrounds,
    text; up to ``max_exact`` of them, each on at least 0.05 % of a
    subsample of about ``sample_size`` pixels) are kept exactly, and the
    remaining entries come from a median cut of the rest of the subsample
    (mostly anti-aliased edges).

    Examples
    --------
    >>> a = np.zeros((2, 2, 3), np.uint8); b = a.copy(); b[0, 0] = (200, 10, 10)
    >>> palette, indexed = _global_palette([a, b])
    >>> palette.tolist(), [f.tolist() for f in indexed]
    ([[0, 0, 0], [200, 10, 10]], [[[0, 0], [0, 0]], [[1, 0], [0, 0]]])
    """
    packed = [_pack(f) for f in frames]
    seen = np.zeros(1 << 24, bool)
    for p in packed:
        seen[p] = True
    present = np.flatnonzero(seen).astype(np.uint32)
    del seen
    if len(present) <= 256:
        palette_codes = present
    else:
        total = sum(p.size for p in packed)
        step = max(1, total // sample_size)
        sample = np.concatenate([p.ravel()[::step] for p in packed])
        values, counts = np.unique(sample, return_counts=True)
        order = np.argsort(-counts, kind="stable")
        frequent = counts[order] >= max(2, 0.0005 * len(sample))
        exact = values[order[:min(max_exact, int(frequent.sum()))]]
        rest = sample[~np.isin(sample, exact)]
        extra = np.empty(0, np.uint32)
        if len(rest):
            strip = Image.frombytes("RGB", (len(rest), 1), _unpack(rest).tobytes())
            quantized = strip.quantize(256 - len(exact), method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
            used = np.unique(np.asarray(quantized))
            colours = quantized.getpalette()
            if colours is None:  # quantize makes a "P" image, which has a palette
                raise RuntimeError("Pillow's quantize returned an image without a palette")
            extra = _pack(np.array(colours[: 3 * (int(used[-1]) + 1)], np.uint8).reshape(-1, 3)[used])
        palette_codes = np.concatenate([exact, extra[~np.isin(extra, exact)]])
    palette = _unpack(palette_codes)
    lut = np.zeros(1 << 24, np.uint8)
    lut[present] = _nearest(_unpack(present), palette)
    return palette, [lut[p] for p in packed]


def _nearest(rgb: np.ndarray, palette: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Index of the nearest palette colour (Euclidean in RGB) for each colour, exact matches kept.

    Examples
    --------
    >>> _nearest(np.array([[0, 0, 0], [250, 250, 250], [9, 9, 9]], np.uint8),
    ...          np.array([[255, 255, 255], [0, 0, 0], [10, 10, 10]], np.uint8)).tolist()
    [1, 0, 2]
    """
    pal = palette.astype(np.int32)
    out = np.empty(len(rgb), np.uint8)
    for start in range(0, len(rgb), chunk):
        block = rgb[start:start + chunk].astype(np.int32)
        distance = ((block[:, None, :] - pal[None, :, :]) ** 2).sum(axis=2)
        out[start:start + chunk] = distance.argmin(axis=1)
    return out


def _write_gif(path: Path, frames: Sequence[np.ndarray], durations_ms: Sequence[int], *,
               comment: str | None = None) -> None:
    """A looping GIF of the frames with one global palette and per-frame durations."""
    palette, indexed = _global_palette(frames)
    flat_palette = palette.ravel().tobytes()
    images = []
    for index in indexed:
        image = Image.frombytes("P", (index.shape[1], index.shape[0]), np.ascontiguousarray(index).tobytes())
        image.putpalette(flat_palette)
        images.append(image)
    options = {"comment": comment} if comment else {}
    # palette= makes Pillow write the palette once, as the global colour table (without it every
    # frame after the first repeats it as a local table).
    images[0].save(path, format="GIF", save_all=True, append_images=images[1:], duration=list(durations_ms),
                   loop=0, optimize=False, disposal=1, palette=flat_palette, **options)


# -------------------------------------------------------------------------------------------- MP4

class _Movie:
    """Frames piped to ffmpeg as they are rendered; the last frame written ``last_copies`` times."""

    def __init__(self, path: Path, fps: float, last_copies: int, metadata: dict) -> None:
        self.path, self.fps, self.last_copies = path, fps, max(1, last_copies)
        self.metadata = {k: str(v) for k, v in metadata.items() if v is not None}
        self.process: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None
        self.pending: np.ndarray | None = None
        self.count = 0

    def _start(self, height: int, width: int) -> None:
        rc = mpl.rcParams
        codec = rc["animation.codec"]
        rate = Fraction(self.fps).limit_denominator(1001)
        args = [rc["animation.ffmpeg_path"], "-y", "-loglevel", "error", "-f", "rawvideo", "-vcodec", "rawvideo",
                "-s", f"{width}x{height}", "-pix_fmt", "rgb24", "-framerate", f"{rate.numerator}/{rate.denominator}",
                "-i", "pipe:", "-vcodec", codec]
        extra = list(rc["animation.ffmpeg_args"])
        if codec == "h264" and "-pix_fmt" not in extra:
            args += ["-pix_fmt", "yuv420p"]
        if rc["animation.bitrate"] > 0:
            args += ["-b", f"{rc['animation.bitrate']}k"]
        for key, value in self.metadata.items():
            args += ["-metadata", f"{key}={value}"]
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen([*args, *extra, str(self.path)], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=self.log)

    def _write(self, frame: np.ndarray) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(frame.tobytes())
        except BrokenPipeError:
            self.finish()  # raises with ffmpeg's message if it failed
            raise RuntimeError(f"ffmpeg stopped reading frames for {self.path}") from None
        self.count += 1

    def add(self, frame: np.ndarray) -> None:
        h, w = frame.shape[:2]
        if h % 2 or w % 2:  # yuv420p wants even sizes: repeat the last row / column
            frame = np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        if self.process is None:
            self._start(*frame.shape[:2])
        if self.pending is not None:
            self._write(self.pending)
        self.pending = frame

    def finish(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        pending, self.pending = self.pending, None
        assert process.stdin is not None and self.log is not None  # both set by _start, with the process
        try:
            if pending is not None:
                for _ in range(self.last_copies):
                    process.stdin.write(pending.tobytes())
                    self.count += 1
            process.stdin.close()
        except BrokenPipeError:
            pass
        code = process.wait()
        self.log.seek(0)
        message = self.log.read().decode(errors="replace").strip()
        self.log.close()
        if code != 0:
            self.path.unlink(missing_ok=True)
            raise RuntimeError(f"ffmpeg failed writing {self.path} (exit status {code}): {message[-2000:]}")

    def abort(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
            if self.log is not None:
                self.log.close()
            self.path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------- HTML

_BUTTONS = (  # id, text glyph (U+FE0E asks for text, not emoji, presentation), what it does
    ("first", "|\u25c0\ufe0e\u25c0\ufe0e", "first frame"),
    ("back", "\u25c0\ufe0e|", "step back"),
    ("play", "\u25b6\ufe0e", "play"),
    ("step", "|\u25b6\ufe0e", "step"),
    ("last", "\u25b6\ufe0e\u25b6\ufe0e|", "last frame"),
)


def _player_html(png_frames: Sequence[bytes], *, interval_ms: float, hold_ms: float, title: str,
                 metadata: dict | None = None) -> str:
    """A self-contained HTML page playing the PNG frames, with controls; it loads nothing from the network.

    Every frame is an ``<img>`` with a ``data:image/png;base64`` source, all but
    the shown one ``hidden``.  Buttons (first, step back, play/pause, step,
    last) carry text glyphs, ``title`` and ``aria-label``; a range slider picks
    a frame and ``frame i / n`` says which is shown.  Keys: space plays or
    pauses, the arrows step, Home and End go to the first and last frame.
    The page plays on opening, looping, the last frame held ``hold_ms`` --
    unless the reader prefers reduced motion, when it waits for play.

    Examples
    --------
    >>> page = _player_html([_png(np.zeros((2, 3, 3), np.uint8))] * 3, interval_ms=250, hold_ms=2000,
    ...                     title="a <demo>")
    >>> page.count("data:image/png;base64,"), "<title>a &lt;demo&gt;</title>" in page, "frame 1 / 3" in page
    (3, True, True)
    >>> 'aria-label="play">' in page and 'type="range"' in page and "http" not in page
    True
    """
    n = len(png_frames)
    first = Image.open(io.BytesIO(png_frames[0]))
    width, height = first.size
    meta = "".join(f'<meta name="{html.escape(str(k))}" content="{html.escape(str(v))}">\n'
                   for k, v in (metadata or {}).items() if v is not None and str(k).lower() != "title")
    images = "".join(
        f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" width="{width}" '
        f'height="{height}" alt="frame {k + 1} of {n}"{" hidden" if k else ""}>\n'
        for k, png in enumerate(png_frames))
    buttons = "".join(f'<button type="button" id="{key}" title="{words}" aria-label="{words}">{glyph}</button>\n'
                      for key, glyph, words in _BUTTONS)
    script = (_asset("player.js").replace("/*INTERVAL*/250", _js_number(interval_ms))
              .replace("/*HOLD*/2000", _js_number(hold_ms)))
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n{meta}'
            f"<title>{html.escape(title)}</title>\n<style>\n{_asset('player.css')}</style>\n</head>\n<body>\n"
            f'<main class="player">\n<div class="frames" id="frames">\n{images}</div>\n'
            f'<div class="controls" role="group" aria-label="animation controls">\n{buttons}'
            f'<input type="range" id="slider" min="1" max="{n}" step="1" value="1" title="frame" '
            f'aria-label="frame" aria-valuetext="frame 1 of {n}">\n'
            f'<output id="readout" for="slider">frame 1 / {n}</output>\n</div>\n'
            f'<p class="hint">Space plays or pauses; the arrow keys step; Home and End go to the first '
            f"and last frame.</p>\n"
            f"<noscript><p>The controls need JavaScript; the first frame is shown.</p></noscript>\n"
            f"</main>\n<script>{script}</script>\n</body>\n</html>\n")


@functools.lru_cache(maxsize=None)
def _asset(name: str) -> str:
    """The player's script or style, from its file beside this module (packaged with it)."""
    return (Path(__file__).resolve().parent / name).read_text(encoding="utf-8")


def _js_number(value: float) -> str:
    """A number as JavaScript source: ``250`` or ``333.333``."""
    return f"{value:.3f}".rstrip("0").rstrip(".")
