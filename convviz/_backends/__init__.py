"""Compute backends.  ``cpu`` runs the Cython/OpenMP kernels from ``_ext/``."""
