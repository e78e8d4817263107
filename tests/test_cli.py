"""The convviz command: demo, explain, gallery, bench, version -- and clear usage errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from PIL import Image

from convviz.cli import main


def test_demo_writes_its_files_and_says_so(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    names = {"coverage.png", "scatter.png", "input_gradient.gif", "input_gradient.html", "explorer.html"}
    assert {p.name for p in (tmp_path / "demo").iterdir()} == names
    for name in names:
        assert f"wrote {tmp_path / 'demo' / name}" in out
    with Image.open(tmp_path / "demo" / "input_gradient.gif") as gif:
        assert gif.n_frames == 4 * 4 + 1  # 7x7, stride 2, SAME: 4x4 output cells, then the sum
    html = (tmp_path / "demo" / "input_gradient.html").read_text()
    assert "data:image/png;base64" in html  # standalone: frames embedded
    page = (tmp_path / "demo" / "explorer.html").read_text()
    assert '"input_h":7' in page and '"stride_h":2' in page and '"padding":"SAME"' in page


def test_demo_takes_geometry_options(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--input", "6,8", "--kernel", "2", "--stride", "2",
                 "--padding", "valid"]) == 0
    assert "input 6x8, kernel 2x2, stride 2, VALID" in capsys.readouterr().out


def test_explain(capsys):
    assert main(["explain", "--input", "8", "--kernel", "3", "--stride", "2", "--padding", "SAME"]) == 0
    out = capsys.readouterr().out
    assert "output size: 4 x 4" in out and "padding: top 0, bottom 1, left 0, right 1" in out
    assert "2 2 4 2 4 2 4 2" in out  # the checkerboard, in ASCII
    assert main(["explain", "--input", "8", "--kernel", "3", "--stride", "3"]) == 0
    out = capsys.readouterr().out
    assert "no gradient: [6, 7]" in out and "<- no gradient" in out and "columns with no gradient: [6, 7]" in out
    assert main(["explain", "--input", "6", "--kernel", "3", "--pads", "2,0,1,3"]) == 0
    assert "padding: top 2, bottom 0, left 1, right 3" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["explain", "--stride", "x"], "--stride: expected an int or two ints"),
    (["explain", "--input", "2", "--kernel", "5"], "no window fits"),
    (["explain", "--padding", "FULL"], "invalid choice"),
    (["explain", "--padding", "EXPLICIT"], "needs --pads"),
    (["explain", "--pads", "1,2"], "expected 4 ints"),
    (["explain", "--stride", "0"], "strides must be at least 1"),
    (["demo"], "--out"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors(argv, words, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert words in capsys.readouterr().err


def test_version_flag(capsys):
    from convviz import __version__

    for flag in ("--version", "-V"):
        assert main([flag]) == 0
        assert capsys.readouterr().out == f"convviz {__version__}\n"
    assert "--version" in _help(capsys)


def _help(capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_version_command_and_its_help(capsys):
    assert main(["version"]) == 0
    assert "convviz:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["version", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: convviz version") and "OpenMP" in out
    with pytest.raises(SystemExit) as info:
        main(["version", "extra"])
    assert info.value.code == 2 and "unrecognized arguments: extra" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["demo", "explain", "gallery", "page", "bench", "version"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: convviz {command}")


def test_python_dash_m_convviz_version():
    from convviz import __version__

    result = subprocess.run([sys.executable, "-m", "convviz", "--version"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"convviz {__version__}\n"


def test_installed_command_runs():
    result = subprocess.run([sys.executable, "-m", "convviz.cli", "explain", "--input", "5", "--kernel", "2"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "output size: 4 x 4" in result.stdout


def test_demo_and_gallery_never_switch_the_callers_backend(tmp_path):
    """A notebook that runs them keeps its backend (here: svg, set before the import)."""
    import subprocess
    import sys

    code = ("import matplotlib; matplotlib.use('svg')\n"
            "from convviz.cli import main\n"
            "from convviz.viz import gallery\n"
            f"main(['demo', '--out', {str(tmp_path / 'demo')!r}, '--input', '4'])\n"
            f"gallery.build({str(tmp_path / 'g')!r}, only=['05_checkerboard_k3_s2.png'], progress=False)\n"
            "print('backend', matplotlib.get_backend())\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "backend svg"
    assert (tmp_path / "g" / "05_checkerboard_k3_s2.png").stat().st_size > 10_000
