"""scripts/make_test_data.py: the committed tests/data files check out against the definition, a planted
error is caught, and freshly written files (few cases) pass the same check and repeat bit for bit."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "make_test_data.py"
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def make_test_data():
    spec = importlib.util.spec_from_file_location("make_test_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _replace_array(path: Path, name: str, array: np.ndarray) -> None:
    """Rewrite one array of an .npz in place (the others untouched)."""
    with np.load(path) as archive:
        entries = {key: archive[key] for key in archive.files}
    entries[name] = array
    np.savez_compressed(path, **entries)


def test_the_script_uses_no_convviz_code():
    source = SCRIPT.read_text()
    assert "import convviz" not in source and "from convviz" not in source


def test_committed_files_pass_the_check(make_test_data, capsys):
    assert make_test_data.check(DATA) == 0
    out = capsys.readouterr().out
    assert "ok  tf_semantics.npz: 160 cases (80 bpi, 80 dwf)" in out
    assert "21 differs" in out
    assert "ok  mindspore.npz: 40 MindSpore 2.10 cases" in out


def test_check_is_the_default_and_a_command(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("ok  ") == 2


@pytest.mark.parametrize("op", ["bpi", "dwf"])
def test_a_planted_error_in_the_tf_file_is_caught(make_test_data, tmp_path, op, capsys):
    shutil.copy(DATA / "tf_semantics.npz", tmp_path / "tf_semantics.npz")
    with np.load(tmp_path / "tf_semantics.npz") as archive:
        meta = json.loads(archive["meta"].tobytes())
        case = next(c for c in meta if c["op"] == op and c["padding"] == "SAME"
                    and np.abs(archive[f"{c['id']}_expected"]).max() > 0)
        expected = archive[f"{case['id']}_expected"].copy()
    flat = expected.reshape(-1)
    k = int(np.argmax(np.abs(flat)))
    flat[k] *= 1 + 1e-9  # far below anything float32 would show, far above the 1e-12 tolerance
    _replace_array(tmp_path / "tf_semantics.npz", f"{case['id']}_expected", expected)
    problems, _ = make_test_data.check_tf(tmp_path / "tf_semantics.npz")
    assert len(problems) == 1 and problems[0].startswith(f"case {case['id']} ({op}")
    assert make_test_data.check(tmp_path) == 1
    assert f"case {case['id']}" in capsys.readouterr().out


def test_a_planted_error_in_the_mindspore_file_is_caught(make_test_data, tmp_path):
    shutil.copy(DATA / "mindspore.npz", tmp_path / "mindspore.npz")
    with np.load(tmp_path / "mindspore.npz") as archive:
        expected = archive["7_expected"].copy()
    flat = expected.reshape(-1)
    k = int(np.argmax(np.abs(flat)))
    flat[k] += np.float32(1e-4) * abs(flat[k])  # ~800 float32 ulps: no rounding of MindSpore's explains it
    _replace_array(tmp_path / "mindspore.npz", "7_expected", expected)
    problems, _ = make_test_data.check_ms(tmp_path / "mindspore.npz")
    assert len(problems) == 1 and problems[0].startswith("case 7")
    run = subprocess.run([sys.executable, str(SCRIPT), "--check", str(tmp_path)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 1 and "case 7" in run.stdout


def test_wrong_shapes_and_unknown_values_are_reported(make_test_data, tmp_path):
    shutil.copy(DATA / "tf_semantics.npz", tmp_path / "tf_semantics.npz")
    with np.load(tmp_path / "tf_semantics.npz") as archive:
        dy = archive["0_out_backprop"]
    _replace_array(tmp_path / "tf_semantics.npz", "0_out_backprop", dy[:, :, :-1])
    problems, _ = make_test_data.check_tf(tmp_path / "tf_semantics.npz")
    assert len(problems) == 1 and "case 0 (bpi): out_backprop is" in problems[0]


def test_same_padding_puts_the_odd_cell_at_the_end(make_test_data):
    assert make_test_data.same_pads(8, 3, 2, 1) == (0, 1)
    assert make_test_data.same_pads(6, 4, 1, 1) == (1, 2)
    assert make_test_data.same_pads(5, 3, 1, 2) == (2, 2)  # dilated: eff 5
    assert make_test_data.same_pads(10, 2, 3, 1) == (0, 1)


def test_write_makes_files_that_pass_the_check_and_repeat(make_test_data, tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), "--write", str(tmp_path / "a"), "--seed", "7",
                          "--cases", "12", "--ms-cases", "4"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok  tf_semantics.npz: 12 cases (6 bpi, 6 dwf)" in run.stdout
    with np.load(tmp_path / "a" / "tf_semantics.npz") as archive:
        meta = json.loads(archive["meta"].tobytes())
        assert [c["op"] for c in meta] == ["bpi", "dwf"] * 6
        assert {c["id"] for c in meta} == set(range(12))
        assert all(archive[f"{c['id']}_expected"].dtype == np.float64 for c in meta)
        for c in meta:
            assert set(c) == ({"id", "op", "strides", "dilations", "padding", "explicit_paddings", "data_format",
                               "dtype", "tf"} | ({"input_sizes", "groups"} if c["op"] == "bpi" else
                                                 {"filter_sizes"}))
    names = {i.filename for i in zipfile.ZipFile(tmp_path / "a" / "tf_semantics.npz").infolist()}
    assert "meta.npy" in names and "11_expected.npy" in names
    if importlib.util.find_spec("tensorflow") is None:
        assert all(c["tf"] == "not run" for c in meta)
    if importlib.util.find_spec("mindspore") is None:
        assert "MindSpore not importable" in run.stdout
        assert not (tmp_path / "a" / "mindspore.npz").exists()
    # the same seed, the same bytes; another seed, other cases
    make_test_data.write(tmp_path / "b", seed=7, cases=12, ms_cases=4, out=lambda *_: None)
    make_test_data.write(tmp_path / "c", seed=8, cases=12, ms_cases=4, out=lambda *_: None)
    first = (tmp_path / "a" / "tf_semantics.npz").read_bytes()
    assert (tmp_path / "b" / "tf_semantics.npz").read_bytes() == first
    assert (tmp_path / "c" / "tf_semantics.npz").read_bytes() != first


def test_written_cases_cover_the_distribution(make_test_data):
    rng = np.random.default_rng(0)
    cases = [make_test_data.random_tf_case(rng, i)[0] for i in range(120)]
    assert {c["padding"] for c in cases} == {"SAME", "VALID", "EXPLICIT"}
    assert {c["data_format"] for c in cases} == {"NHWC", "NCHW"}
    assert {c["dtype"] for c in cases} == {"float16", "bfloat16", "float32", "float64"}
    assert {c["groups"] for c in cases if c["op"] == "bpi"} == {1, 2, 3}
    assert {s for c in cases for s in c["strides"]} == {1, 2, 3}
    assert {d for c in cases for d in c["dilations"]} == {1, 2, 3}
    ms = [make_test_data.random_ms_case(rng, i)[0] for i in range(60)]
    assert {c["pad_mode"] for c in ms} == {"valid", "same", "pad"} and {c["group"] for c in ms} == {1, 2, 4}
