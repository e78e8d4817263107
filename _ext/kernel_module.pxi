# What every op kernel module (convviz/ops/_<op>.pyx) begins with, included as its
# first statement: NumPy's C API, and the reader of the module's scratch record.
# Each kernel entry point returns the bytes of scratch memory it allocated (and notes
# them with record_scratch); last_scratch_bytes() gives the calling thread's most
# recent value, which the benchmark counts as memory beyond the result.
cimport numpy as cnp

from _cvz cimport recorded_scratch

cnp.import_array()


def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    return recorded_scratch()
