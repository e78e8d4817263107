// What a kernel module's most recent call did, per thread: the scratch bytes it
// allocated and whether it ran on AMX tiles.  Each Cython module includes this
// once (through _cvz.pxd) and so has its own record, and concurrent calls never
// see each other's.
#pragma once

#include <cstddef>

static thread_local std::size_t cvz_scratch_record = 0;
static thread_local bool cvz_amx_record = false;

// A call that ran on the SIMD kernels.
static inline void cvz_record_scratch(std::size_t bytes) {
    cvz_scratch_record = bytes;
    cvz_amx_record = false;
}

// A call that ran on AMX tiles.
static inline void cvz_record_amx_scratch(std::size_t bytes) {
    cvz_scratch_record = bytes;
    cvz_amx_record = true;
}

static inline std::size_t cvz_recorded_scratch() { return cvz_scratch_record; }

static inline bool cvz_recorded_amx() { return cvz_amx_record; }
