# What every op kernel module (convviz/ops/_<op>.pyx) begins with, included as its
# first statement: NumPy's C API, and the readers of the module's call record.
# Each kernel entry point returns the bytes of scratch memory it allocated and notes
# them with record_scratch (record_amx_scratch where it ran on AMX tiles);
# last_scratch_bytes() gives the calling thread's most recent value, which the
# benchmark counts as memory beyond the result, and last_ran_on_amx() where it ran.
cimport numpy as cnp

from _cvz cimport recorded_amx, recorded_scratch

cnp.import_array()


def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    return recorded_scratch()


def last_ran_on_amx() -> bool:
    """Whether the calling thread's most recent kernel call in this module ran on AMX tiles."""
    return recorded_amx()
