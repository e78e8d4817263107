"""pytest configuration: Hypothesis profiles and common fixtures."""

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

@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)
