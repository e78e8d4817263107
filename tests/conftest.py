"""pytest configuration: Hypothesis profiles, test markers and common fixtures."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings


settings.register_profile(
    "default", deadline=None, max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ci", deadline=None, max_examples=300, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", deadline=None, max_examples=1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("CONVVIZ_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default"))

# Markers (registered in pyproject.toml), given here by file so that a new test in these files
# carries them without a decorator: what needs more than the kernels and the library -- a
# compiler run, a browser, the site's build, the notebooks, a GPU or its emulator -- and what
# is slow for another reason.  The inner loop skips them all (CONTRIBUTING.md, "The fast loop"):
#     python -m pytest -m "not (slow or build or browser or docs or notebooks or gpu)"
# CI runs everything.
FILE_MARKERS = {
    "test_build.py": ("build", "slow"),  # clang/ASan builds, stub checks
    "test_packaging.py": ("build", "slow"),  # sdist and wheel
    "test_typing.py": ("build", "slow"),  # mypy over the package
    "test_browser.py": ("browser", "slow"),  # JupyterLab in Chromium
    "test_explorer_page.py": ("browser", "slow"),  # the explorer page in Chromium
    "test_docs.py": ("docs", "slow"),  # the Sphinx site, every notebook executed
    "test_notebooks.py": ("notebooks", "slow"),
    "test_gpu.py": ("gpu",),  # on a GPU, or on the CPU emulator of tests/cupy_emulator.py
    "test_gpu_dispatch.py": ("gpu",),
    "test_cuda_source.py": ("gpu",),  # nvcc where present
    "test_gallery.py": ("slow",),  # draws the whole gallery
    "test_gallery_legibility.py": ("slow",),  # every gallery figure and animation frame
}
# Single tests of other files: (file, test function) -> markers.  The slow ones took 2 s or
# more in all on 2 cores (pytest --durations=0, stop 26); together about 60% of the rest.
TEST_MARKERS = {
    ("test_save.py", "test_html_player_in_chromium"): ("browser", "slow"),
    ("test_every_op.py", "test_nan_and_inf_land_where_the_reference_puts_them"): ("slow",),
    ("test_every_op.py", "test_every_simd_variant_matches_the_reference"): ("slow",),
    ("test_nonfinite.py", "test_input_gradient"): ("slow",),
    ("test_nonfinite.py", "test_depthwise_filter_gradient"): ("slow",),
    ("test_cli.py", "test_demo_writes_its_files_and_says_so"): ("slow",),
    ("test_cli.py", "test_demo_takes_geometry_options"): ("slow",),
    ("test_cli.py", "test_demo_and_gallery_never_switch_the_callers_backend"): ("slow",),
    ("test_depthwise_conv2d_native.py", "test_results_beyond_the_caches_take_streaming_stores"): ("slow",),
    ("test_depthwise_conv2d_native.py", "test_staged_rows_in_a_ring_or_one_slot_per_kernel_row"): ("slow",),
    ("test_depthwise_conv2d_native.py", "test_stencil_rows_of_every_width"): ("slow",),
    ("test_depthwise_conv2d_native.py", "test_both_ops_on_every_simd_variant"): ("slow",),
    ("test_bench.py", "test_tensorflow_computes_the_same"): ("slow",),
    ("test_bench.py", "test_pytorch_computes_the_same_where_same_padding_is_symmetric"): ("slow",),
    ("test_inputs.py", "test_command_line_version_and_bench"): ("slow",),
    ("test_test_data.py", "test_write_makes_files_that_pass_the_check_and_repeat"): ("slow",),
    ("test_widgets.py", "test_every_control_redraws"): ("slow",),
    ("test_conv2d_backprop_input.py", "test_input_gradient_kernels"): ("slow",),
    ("test_depthwise_conv2d_native_backprop_filter.py", "test_filter_gradient_kernels"): ("slow",),
    ("test_wait_policy.py", "test_pytorch_imported_first"): ("slow",),
    ("test_wait_policy.py", "test_a_users_choice_is_kept"): ("slow",),
    ("test_viz.py", "test_padding_is_drawn_around_the_input_never_over_it"): ("slow",),
    ("test_viz.py", "test_depthwise_view"): ("slow",),
    ("test_viz.py", "test_scatter_shows_one_cell_through_every_tap"): ("slow",),
    ("test_viz.py", "test_figures_use_colour_blind_safe_maps"): ("slow",),
    ("test_viz.py", "test_to_html_shows_an_animation_in_a_notebook_offline"): ("slow",),
    ("test_viz.py", "test_coverage_counts_and_patterns"): ("slow",),
    ("test_viz.py", "test_animations_show_their_numbers_frame_by_frame"): ("slow",),
    ("test_viz.py", "test_depthwise_filter_gradient_animation_and_html"): ("slow",),
    ("test_viz.py", "test_input_gradient_animation"): ("slow",),
}


# Under pytest-xdist (the README's `python -m pytest -n auto`) whole files go to the workers, as
# each one asks for more, in this order: the longest files first (seconds on 2 cores, pytest
# --durations=0, stop 38), so that none of them starts last and runs alone.  The rest follow in
# collection order.  Files, not single tests: a file's module fixtures (the site's build, the
# gallery, Chromium) are made once.
LONGEST_FIRST = (
    "test_build.py",              # 148 s: the clang + AddressSanitizer build and its tests
    "test_docs.py",               # 108 s: the site, every notebook executed
    "test_explorer_page.py",      # 88 s
    "test_gallery_legibility.py",  # 78 s
    "test_notebooks.py",          # 75 s
    "test_viz.py",                # 38 s
    "test_every_op.py",           # 32 s
    "test_gallery.py",            # 28 s
    "test_gpu.py",                # 23 s
    "test_browser.py",            # 23 s
    "test_typing.py",             # 22 s
)
MAX_AUTO_WORKERS = 6  # more would wait on test_build.py, 148 s of the ~830 s in all


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per usable CPU, at most MAX_AUTO_WORKERS."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(usable, MAX_AUTO_WORKERS))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # With -n and no --dist of the user's: files, in LONGEST_FIRST's order (xdist would hand
    # out single tests, or files sorted by their number of tests).
    given = " ".join(config.invocation_params.args)
    if getattr(config.option, "numprocesses", None) and "--dist" not in given and "-d" not in given.split():
        config.option.dist = "loadfile"
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        markers = FILE_MARKERS.get(item.path.name, ())
        markers += TEST_MARKERS.get((item.path.name, getattr(item, "originalname", item.name)), ())
        for name in markers:
            item.add_marker(getattr(pytest.mark, name))
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)
