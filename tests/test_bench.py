"""The speed benchmark (``convviz bench``): its cases, the calls it builds from the op
records, its progress, table and JSON.  No timing is asserted: speed claims come from
running the benchmark, not from tests; the peers' checks skip when they are absent."""

from __future__ import annotations

import json

import numpy as np
import pytest

from convviz import bench
from convviz.cli import main
from convviz.ops import BY_NAME, OPS
from convviz.ops._op import window_arguments

TINY = ["fwd_tiny", "bpi_tiny", "dwf_tiny"]


def _small_cases() -> list[bench.Case]:
    """Each benchmarked op on a small geometry with everything that changes the arguments:
    odd SAME padding, unequal-sized sides, stride, dilation, a multiplier, both layouts."""
    ops = sorted({case.op for case in bench.CASES})
    return [bench.Case(f"small_{data_format}", op, 2, 7, 6, 3, 2, 3, stride, dilation, data_format=data_format)
            for op in ops for data_format in ("NHWC", "NCHW") for stride, dilation in ((1, 1), (2, 2))]


small = pytest.mark.parametrize("case", _small_cases(), ids=lambda c: f"{c.op}-{c.data_format}-s{c.stride}")


def test_every_case_names_an_op_whose_arguments_the_benchmark_can_build():
    names = {op.name for op in OPS}
    for case in bench.CASES:
        assert case.op in names, case.label
        assert set(case.record.args) <= set(bench.ARGUMENTS), case.label
        assert case.op in bench.TORCH_CALLS, f"{case.op}: PyTorch's call is missing from bench.TORCH_CALLS"
    assert len({case.label for case in bench.CASES}) == len(bench.CASES)  # every row tells its case apart
    with pytest.raises(ValueError, match="no op 'conv3d'"):
        bench.Case("x", "conv3d", 1, 8, 8, 3, 8, 3, 1, 1)


def test_conv2d_cases_and_the_kept_labels():
    forward = {case.name: case for case in bench.CASES if case.op == "conv2d"}
    assert {name: case.label.split()[1] for name, case in forward.items()} == {
        "fwd_tiny": "1,8,8,3,8,3,1,1", "fwd_resnet": "8,56,56,64,64,3,1,1", "fwd_stride2": "8,28,28,128,256,3,2,1",
        "fwd_stem": "4,224,224,3,64,7,2,1", "fwd_pointwise": "8,28,28,256,256,1,1,1", "fwd_late": "8,7,7,512,512,3,1,1"}
    labels = [case.label for case in bench.CASES]
    assert "bpi_dilated 4,64,64,32,32,3,1,2 [float16, NHWC]" in labels  # BENCHMARKS.md quotes these
    assert "dwf_mobilenet 8,56,56,64,1,3,1,1 [float32, NCHW]" in labels


def test_flops_come_from_the_records():
    by_name = {case.name: case for case in bench.CASES if case.dtype == "float32" and case.data_format == "NHWC"}
    assert by_name["fwd_stem"].flops == 2.0 * 4 * 112 * 112 * 64 * 7 * 7 * 3
    assert by_name["bpi_stride2"].flops == 2.0 * 8 * 28 * 28 * 128 * 3 * 3 * 64
    assert by_name["dwf_mult2"].flops == 2.0 * 4 * 32 * 32 * 32 * 2 * 3 * 3
    for case in bench.CASES:
        assert case.flops == BY_NAME[case.op].flops(case.geometry)


@small
def test_the_built_call_is_the_op_on_the_cases_geometry(case, rng):
    data = bench._data(case, rng)
    assert list(data) == list(case.record.args)
    args = [data[name] for name in case.record.args]
    got = bench.convviz_call(case, data, 2)()
    expected = case.record.reference(*args, *window_arguments(case.geometry, "SAME"))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    g = case.geometry
    assert got.shape == {"output": g.output_shape, "input gradient": g.input_shape}.get(case.record.result,
                                                                                       g.filter_shape)


@small
def test_tensorflow_computes_the_same(case, rng):
    pytest.importorskip("tensorflow")
    if case.op.startswith("depthwise_conv2d_native_backprop") and case.dilation > 1:
        pytest.skip("TensorFlow's CPU kernels of the depthwise gradients ignore dilations (wrong values, NOTES.md)")
    data = bench._data(case, rng)
    np.testing.assert_allclose(bench.tensorflow_call(case, data)(), bench.convviz_call(case, data, 2)(),
                               rtol=1e-4, atol=1e-4)


@small
def test_pytorch_computes_the_same_where_same_padding_is_symmetric(case, rng):
    pytest.importorskip("torch")
    data = bench._data(case, rng)
    got = bench.torch_call(case, data)().detach().numpy()
    ours = bench.convviz_call(case, data, 2)()
    record = case.record
    if record.result_role == "filter" and record.depthwise:  # [C*M, 1, KH, KW] -> [KH, KW, C, M]
        got = got[:, 0].transpose(1, 2, 0).reshape(ours.shape)
    elif record.result_role == "filter":  # OIHW -> HWIO
        got = got.transpose(2, 3, 1, 0)
    elif case.data_format == "NHWC":
        got = got.transpose(0, 2, 3, 1)
    assert got.shape == ours.shape
    top, bottom, left, right = case.geometry.pads
    # A forward op pads exactly; a gradient's window is shifted where SAME is odd (see TorchCase).
    if record.result_role == "output" or (top, left) == (bottom, right):
        np.testing.assert_allclose(got, ours, rtol=1e-4, atol=1e-4)


def test_a_peer_without_a_call_for_the_op_is_noted(monkeypatch):
    monkeypatch.setattr(bench.timing, "_load_peers", lambda wanted, threads: {"torch": "test"})
    monkeypatch.setattr(bench.peers, "TORCH_CALLS", {})
    cases = [case for case in bench.CASES if case.name == "fwd_tiny"]
    results, _ = bench.run(cases, peers=("torch",), min_seconds=0, min_rounds=1, max_rounds=1, scaling=False,
                           peaks=False)
    assert results[0].notes == {"torch": "no PyTorch call (bench.TORCH_CALLS)"}
    assert "no PyTorch call" in bench.table(results, ("torch",))


ROOFLINE_COLUMNS = ["traffic", "GB/s", "% FMA", "% BW", "bound", "% roof"]


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split(" | ")]


def test_quick_run_prints_progress_a_row_per_case_and_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench.cli, "PEAK_ARRAY_BYTES", 1 << 20)  # the run's peaks, quickly (not a real bandwidth)
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--no-peers", "--only", ",".join(TINY), "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    header = next(line for line in out.splitlines() if line.startswith("| case"))
    assert _cells(header)[3:9] == ROOFLINE_COLUMNS  # the roofline beside GFLOP/s
    rows = [line for line in out.splitlines() if line.startswith("| ") and "_tiny " in line]
    assert [row.split()[1] for row in rows] == TINY  # one row per case, in CASES order
    for row in rows:
        cells = _cells(row)
        assert len(cells) == 16 and cells[1] != "-"  # convviz was timed
        assert cells[11] == "-"  # no peer ran: no peer's roofline
        assert cells[7] in ("memory", "compute") and all(cell.rstrip("\\*").isdigit() for cell in cells[5:9:3])
    for number, name in enumerate(TINY, 1):  # a line when each case starts and when it is done
        assert f"[{number}/3] {name} " in err and "..." in err
        assert any(line.strip().startswith(f"[{number}/3] {name} ") and ": convviz " in line
                   for line in err.splitlines())
    # The peaks are measured first, on the run's threads and the kernels' ISA, and printed;
    # again after the cases, and the better of the two counts.
    assert err.index("measuring the float32 FMA peak") < err.index("[1/3]")
    assert err.rindex("measuring the float32 FMA peak") > err.index("[3/3]")
    assert "the best of the measurements before and after the cases" in err
    payload = json.loads(path.read_text())
    machine, peaks = payload["info"]["machine"], payload["info"]["peaks"]
    assert {"cpu", "isa", "cores", "kernels", "kernels_compiled", "openmp"} <= set(machine)
    assert isinstance(machine["isa"], list) and set(machine["isa"]) <= set(bench.ISA_FLAGS)
    assert machine["cpu"] in out and machine["kernels"] in out
    assert peaks["isa"] == machine["kernels"] and peaks["threads"] == (2 if machine["openmp"] else 1)
    assert peaks["fma_gflops"]["float32"] > 0 and peaks["fma_gflops"]["float64"] > 0
    assert peaks["bandwidth_gbs"]["copy"] > 0 and peaks["roof_bandwidth_gbs"] >= peaks["bandwidth_gbs"]["copy"]
    machine_line = next(line for line in out.splitlines() if line.startswith("machine: "))
    assert machine["cpu"] in machine_line and f"ISA {peaks['isa']}" in machine_line
    assert f"FMA peak {peaks['fma_gflops']['float32']:.1f} GFLOP/s" in machine_line
    assert f"copy {peaks['bandwidth_gbs']['copy']:.1f}" in machine_line
    assert "Roofline columns:" in out
    assert [(r["name"], r["op"]) for r in payload["results"]] == [
        ("fwd_tiny", "conv2d"), ("bpi_tiny", "conv2d_backprop_input"),
        ("dwf_tiny", "depthwise_conv2d_native_backprop_filter")]
    assert all(r["times"]["convviz"] > 0 and r["flops"] > 0 for r in payload["results"])
    for r in payload["results"]:
        case = next(c for c in bench.CASES if c.label == r["label"])
        assert r["bytes"] == case.bytes
        assert r["roofline"]["bound"] in ("memory", "compute") and r["best_peer_roofline"] is None
        assert r["roofline"]["gbs"] == pytest.approx(case.bytes / r["times"]["convviz"] / 1e9)


def test_compulsory_bytes_are_the_tensor_arguments_and_the_result():
    by_label = {case.label: case for case in bench.CASES}
    fwd = by_label["fwd_resnet 8,56,56,64,64,3,1,1"]  # input, filter, output
    assert fwd.bytes == 4 * (8 * 56 * 56 * 64 + 3 * 3 * 64 * 64 + 8 * 56 * 56 * 64)
    bpi = by_label["bpi_stride2 8,56,56,64,128,3,2,1"]  # filter, out_backprop (input_sizes is a list), input gradient
    assert bpi.bytes == 4 * (3 * 3 * 64 * 128 + 8 * 28 * 28 * 128 + 8 * 56 * 56 * 64)
    dwf = by_label["dwf_mobilenet 8,56,56,64,1,3,1,1"]  # input, out_backprop, filter gradient
    assert dwf.bytes == 4 * (2 * 8 * 56 * 56 * 64 + 3 * 3 * 64)
    assert by_label["dwf_mobilenet 8,56,56,64,1,3,1,1 [float64, NHWC]"].bytes == 2 * dwf.bytes
    assert by_label["dwf_mobilenet 8,56,56,64,1,3,1,1 [bfloat16, NHWC]"].bytes == dwf.bytes // 2
    assert by_label["dwf_mobilenet 8,56,56,64,1,3,1,1 [float32, NCHW]"].bytes == dwf.bytes


def test_roofline_bound_is_memory_below_the_ridge_and_compute_above():
    peak, bandwidth = 200.0, 40.0  # ridge point: 5 flop/byte
    memory = bench.roofline(flops=4e8, nbytes=1e8, seconds=0.01, peak=peak, bandwidth=bandwidth)
    assert (memory.intensity, memory.ridge, memory.bound) == (4.0, 5.0, "memory")
    assert memory.gbs == pytest.approx(10.0) and memory.of_bandwidth == pytest.approx(0.25)
    assert memory.gflops == pytest.approx(40.0) and memory.of_peak == pytest.approx(0.2)
    assert memory.of_roof == pytest.approx(40.0 / (4.0 * bandwidth))  # the slanted roof
    compute = bench.roofline(flops=6e9, nbytes=1e8, seconds=0.1, peak=peak, bandwidth=bandwidth)
    assert (compute.intensity, compute.bound) == (60.0, "compute")
    assert compute.of_roof == pytest.approx(60.0 / peak) == compute.of_peak  # the flat roof
    assert bench.roofline(5e8, 1e8, 1.0, peak, bandwidth).bound == "compute"  # on the ridge


def test_the_roof_bandwidth_and_the_peak_of_each_dtype():
    bandwidth = {"read": 40.0, "write": 30.0, "copy": 35.0, "copy_streaming": 50.0}
    assert bench.roof_bandwidth(bandwidth) == 50.0
    assert bench.roof_bandwidth({k: v for k, v in bandwidth.items() if k != "copy_streaming"}) == 35.0
    peaks = {"fma_gflops": {"float32": 200.0, "float64": 100.0}}
    assert [bench.peak_gflops(peaks, d) for d in ("float32", "float64", "float16", "bfloat16")] == [
        200.0, 100.0, 200.0, 200.0]
    tiles = {"fma_gflops": {"float32": 200.0, "float64": 100.0, "amx_bf16": 3000.0}, "amx_runs": True}
    assert [bench.peak_gflops(tiles, "bfloat16", op=op) for op in sorted(bench.AMX_OPS)] == [3000.0] * 3
    assert bench.peak_gflops(tiles, "bfloat16", op="depthwise_conv2d_native_backprop_filter") == 200.0
    assert bench.peak_gflops(tiles, "float32", op="conv2d") == 200.0
    assert bench.peak_gflops({**tiles, "amx_runs": False}, "bfloat16", op="conv2d") == 200.0


def _fake_peaks(llc_bytes: int = 32 << 20) -> dict:
    return {"isa": "avx2", "threads": 2, "fma_gflops": {"float32": 200.0, "float64": 100.0},
            "bandwidth_gbs": {"read": 40.0, "write": 30.0, "copy": 35.0, "copy_streaming": 50.0},
            "roof_bandwidth_gbs": 50.0, "array_bytes": 128 << 20, "llc_bytes": llc_bytes, "seconds": 1.0}


def test_table_roofline_columns_with_made_up_numbers():
    by_label = {case.label: case for case in bench.CASES}
    fwd, dwc = by_label["fwd_resnet 8,56,56,64,64,3,1,1"], by_label["dwc_mobilenet 8,112,112,32,1,3,1,1"]
    results = [bench.Result(fwd, times={"convviz": fwd.flops / 100e9}),  # 100 GFLOP/s
               bench.Result(dwc, times={"convviz": dwc.bytes / 25e9}),  # 25 GB/s
               bench.Result(fwd, times={"convviz": None})]
    text = bench.table(results, ("torch",), _fake_peaks(llc_bytes=16 << 20))
    header, _, *rows = text.splitlines()
    assert _cells(header)[3:9] == ROOFLINE_COLUMNS and len(_cells(header)) == 15
    first, second, third = (_cells(row) for row in rows)
    # fwd_resnet: 142 flop/byte, far above the 4 flop/byte ridge; its 12.4 MiB fit the 16 MiB cache (\*)
    assert first[3:9] == ["12.4 MiB", "0.7", "50", "1\\*", "compute", "50"]
    # dwc_mobilenet: 2.25 flop/byte, below the ridge: half the bandwidth is half its roof
    assert second[3:9] == ["24.5 MiB", "25.0", "28", "50", "memory", "50"]
    assert third[3:9] == ["12.4 MiB", "-", "-", "-", "-", "-"]
    legend = bench.roofline_legend(_fake_peaks())
    assert "50.0 GB/s" in legend and "200.0 GFLOP/s" in legend and "4.0 flop/byte" in legend
    # No peaks (the GPU run): the table as before.
    assert len(_cells(bench.table(results, ("torch",)).splitlines()[0])) == 8


def test_unknown_case_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--only", "fwd_tiny,no_such_case"])
    assert info.value.code == 2 and "unknown case(s) ['no_such_case']" in capsys.readouterr().err


def test_the_table_sets_the_fastest_peer_against_the_same_roof():
    case = next(c for c in bench.CASES if c.name == "fwd_resnet")
    peaks = {"fma_gflops": {"float32": 400.0, "float64": 200.0}, "roof_bandwidth_gbs": 40.0}
    result = bench.Result(case, times={"convviz": 0.006, "tensorflow": 0.007, "torch": 0.005})
    header, _, row = bench.table([result], ("tensorflow", "torch"), peaks).splitlines()
    column = _cells(header).index("best peer % roof")
    assert _cells(header)[column - 1] == "speedup vs best peer"
    # torch's 5 ms against the 400 GFLOP/s roof (the case is compute-bound)
    assert _cells(row)[column] == f"{case.flops / 0.005 / 1e9 / 400 * 100:.0f}"
    assert _cells(row)[column - 1] == "0.83x"


def test_the_shortfall_table_lists_only_the_cases_under_the_target():
    by_name = {case.name: case for case in bench.CASES}
    fwd, dwc, bpf = by_name["fwd_resnet"], by_name["dwc_mobilenet"], by_name["bpf_resnet"]
    peaks = {"fma_gflops": {"float32": 400.0, "float64": 200.0}, "roof_bandwidth_gbs": 40.0}
    at_peak = lambda case, fraction: case.flops / (fraction * 400e9)  # noqa: E731
    at_bandwidth = lambda case, fraction: case.bytes / (fraction * 40e9)  # noqa: E731
    results = [
        bench.Result(fwd, times={"convviz": at_peak(fwd, 0.86), "torch": at_peak(fwd, 0.90),
                                 "tensorflow": at_peak(fwd, 0.70)}),  # 0.96x: listed
        bench.Result(bpf, times={"convviz": at_peak(bpf, 0.84), "torch": at_peak(bpf, 0.80)}),  # 1.05x: met
        bench.Result(dwc, times={"convviz": at_bandwidth(dwc, 0.60), "torch": at_bandwidth(dwc, 0.75)}),
        bench.Result(dwc, times={"convviz": at_bandwidth(dwc, 0.60)}),  # no peer time: nothing to compare
    ]
    header, _, *rows = bench.shortfall_table(results, ("tensorflow", "torch"), peaks).splitlines()
    assert _cells(header) == ["case", "speedup vs best peer", "bound", "convviz % roof", "best peer % roof",
                              "% roof 1.05x needs"]
    assert [_cells(row) for row in rows] == [
        [fwd.label, "0.955x", "compute", "86", "90", "94"],  # 0.9556x, rounded down; 1.05 x torch's 90%
        [dwc.label, "0.800x", "memory", "60", "75", "79"],
    ]
    # Just under the target: listed, and not printed as if it met it.
    just_under = bench.Result(fwd, times={"convviz": at_peak(fwd, 0.8), "torch": at_peak(fwd, 0.8 / 1.0499)})
    assert _cells(bench.shortfall_table([just_under], ("torch",), peaks).splitlines()[2])[1] == "1.049x"
    assert bench.shortfall_table(results[1:2], ("torch",), peaks) == ""  # every case met
    assert bench.shortfall_table(results, ("torch",), None) == ""  # no peaks (the GPU run)


def test_load_times_each_case_again_beside_busy_processes(tmp_path, capsys, monkeypatch):
    """--load N: every case timed again while N busy processes run (and are gone after),
    the loaded/quiet table and the loaded times in the JSON."""
    monkeypatch.setattr(bench.cli, "PEAK_ARRAY_BYTES", 1 << 20)
    started = []
    real = bench.busy_processes

    @__import__("contextlib").contextmanager
    def watched(count, seconds=bench.LOAD_SECONDS):
        with real(count, seconds) as procs:
            assert len(procs) == count and all(p.poll() is None for p in procs)  # running while timed
            started.append(procs)
            yield procs

    monkeypatch.setattr(bench.timing, "busy_processes", watched)
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--no-peers", "--only", "fwd_tiny,dwf_tiny", "--load", "2",
                 "--json", str(path)]) == 0
    out = capsys.readouterr().out
    # once per case, and once for the machine's own reference calls (machine_under_load)
    assert len(started) == 3 and all(p.returncode is not None for procs in started for p in procs)
    assert "Under load: each case again with 2 busy processes beside it" in out
    assert "The machine itself, with 2 busy processes beside one thread: a 32 MiB copy (DRAM)" in out
    rows = [line for line in out.splitlines() if line.startswith("| fwd_tiny") or line.startswith("| dwf_tiny")]
    loaded_rows = [row for row in rows if len(_cells(row)) == 6]  # the load table's rows
    assert [row.split()[1] for row in loaded_rows] == ["fwd_tiny", "dwf_tiny"]
    assert all(float(_cells(row)[3]) > 0 for row in loaded_rows)
    assert "convviz's loaded/quiet ratio: median" in out
    payload = json.loads(path.read_text())
    assert payload["info"]["load"] == 2
    assert all(r["loaded"]["convviz"] > 0 for r in payload["results"])
    assert all(ratio > 0 for ratio in payload["info"]["machine_under_load"].values())


def test_load_is_bounded(capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--load", "65", "--only", "fwd_tiny"])
    assert info.value.code == 2 and "--load must be 0..64, got 65" in capsys.readouterr().err
    with pytest.raises(ValueError, match="count must be 0..64"):
        with bench.busy_processes(-1):
            pass


def test_sweep_times_every_op_on_the_networks_layers_and_sums_up_per_op(capsys, monkeypatch):
    """--sweep: the cases come from convviz.networks (each op of every distinct layer at each
    batch), --only picks ops, and the per-op summary closes the run."""
    from convviz import networks

    all_cases = bench.sweep_cases(["resnet18", "mobilenet_v2"], batches=(1, 8))
    assert {c.op for c in all_cases} == set(bench.SHORT_NAMES)  # all six ops
    assert len({c.label for c in all_cases}) == len(all_cases)
    monkeypatch.setattr(bench.cli, "PEAK_ARRAY_BYTES", 1 << 20)
    monkeypatch.setattr(networks, "NETWORKS", {"tiny": lambda: [networks.Layer(8, 3, 8, 3, 1),
                                                                networks.Layer(8, 8, 8, 3, 2, depthwise=True)]})
    assert main(["bench", "--quick", "--no-peers", "--sweep", "--batches", "1,2", "--only", "fwd,dwf"]) == 0
    out = capsys.readouterr().out
    labels = [_cells(line)[0] for line in out.splitlines() if line.startswith("| fwd ") or line.startswith("| dwf ")]
    assert labels == ["fwd 1,8,8,3,8,3,1,1", "fwd 2,8,8,3,8,3,1,1", "dwf 1,8,8,8,1,3,2,1", "dwf 2,8,8,8,1,3,2,1"]
    assert "The sweep, per op" in out and "| op | cases | min | median | max |" in out


def test_sweep_arguments_are_checked(capsys):
    for argv, message in ((["--networks", "alexnet"], "unknown network(s) ['alexnet']"),
                          (["--batches", "0"], "batch sizes of 1 or more"), (["--batches", "x"], "whole numbers"),
                          (["--only", "fwd_resnet"], "unknown case(s) ['fwd_resnet']")):
        with pytest.raises(SystemExit) as info:
            main(["bench", "--sweep", *argv])
        assert info.value.code == 2 and message in capsys.readouterr().err
