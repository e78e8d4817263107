# What every op kernel module (convviz/ops/_<op>.pyx) begins with, included as its
# first statement: NumPy's C API, and the readers of the module's call record.
# Each kernel entry point returns the bytes of scratch memory it allocated and notes
# them with record_scratch (record_amx_scratch where it ran on AMX tiles);
# last_scratch_bytes() gives the calling thread's most recent value, which the
# benchmark counts as memory beyond the result, and last_ran_on_amx() where it ran.
cimport numpy as cnp

from _cvz cimport record_scratch, recorded_amx, recorded_scratch

cnp.import_array()


def last_scratch_bytes() -> int:
    """Scratch bytes of the calling thread's most recent kernel call in this module (0 before any)."""
    return recorded_scratch()


def record_scratch_bytes(Py_ssize_t used) -> None:
    """Note ``used`` as the calling thread's most recent scratch bytes in this module:
    a plan's total when it ran the op on another module's kernel (the input gradient
    per stride phase, a short 1x1 filter gradient on the forward kernel)."""
    record_scratch(used)


def last_ran_on_amx() -> bool:
    """Whether the calling thread's most recent kernel call in this module ran on AMX tiles."""
    return recorded_amx()
