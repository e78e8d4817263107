// The scratch bytes of a kernel module's most recent call, per thread: each
// Cython module includes this once (through _cvz.pxd) and so has its own
// record, and concurrent calls never see each other's numbers.
#pragma once

#include <cstddef>

static thread_local std::size_t cvz_scratch_record = 0;

static inline void cvz_record_scratch(std::size_t bytes) { cvz_scratch_record = bytes; }

static inline std::size_t cvz_recorded_scratch() { return cvz_scratch_record; }
