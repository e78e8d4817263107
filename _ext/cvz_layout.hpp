// Layout moves shared by the kernels: runs converted between the element
// types and the compute type T, and rows of pixels x channels gathered into /
// scattered out of contiguous buffers (NHWC runs, NCHW through register
// transposes).  Written against Simd<T> (cvz_simd_generic.hpp); included by
// cvz_per_isa.hpp once per instruction set (no include guard on purpose).

// dst[0..n) = src[offset .. offset+n) (contiguous), converted to T.  Half types
// use the ISA's conversion instructions (exact, like NumPy / ml_dtypes).
template <class T, int TYPE>
static inline void convert_run(T* dst, const void* src, idx offset, idx n) {
    typedef Simd<T> S;
    idx i = 0;
    if (TYPE == F16 || TYPE == BF16) {
        const std::uint16_t* p = (const std::uint16_t*)src + offset;
        if constexpr (sizeof(T) == 4 && S::HALF) {
            for (; i + S::V <= n; i += S::V)
                S::store(dst + i, TYPE == F16 ? S::load_f16(p + i) : S::load_bf16(p + i));
        }
        for (; i < n; ++i) dst[i] = (T)(TYPE == F16 ? f16_to_f32(p[i]) : bf16_to_f32(p[i]));
    } else if (TYPE == F32) {
        const float* p = (const float*)src + offset;
        if constexpr (sizeof(T) == 4) {
            std::memcpy(dst, p, (std::size_t)n * sizeof(float));
        } else {
            for (; i < n; ++i) dst[i] = (T)p[i];
        }
    } else {
        const double* p = (const double*)src + offset;
        if constexpr (sizeof(T) == 8) {
            std::memcpy(dst, p, (std::size_t)n * sizeof(double));
        } else {
            for (; i < n; ++i) dst[i] = (T)p[i];
        }
    }
}

// dst[offset .. offset+n) (contiguous, of TYPE) = src[0..n), rounded to nearest even.
template <class T, int TYPE>
static inline void store_run(void* dst, idx offset, const T* src, idx n) {
    typedef Simd<T> S;
    idx i = 0;
    if (TYPE == F16 || TYPE == BF16) {
        std::uint16_t* p = (std::uint16_t*)dst + offset;
        if constexpr (sizeof(T) == 4 && S::HALF) {
            for (; i + S::V <= n; i += S::V) {
                if (TYPE == F16) S::store_f16(p + i, S::load(src + i)); else S::store_bf16(p + i, S::load(src + i));
            }
        }
        for (; i < n; ++i) p[i] = TYPE == F16 ? f32_to_f16((float)src[i]) : f32_to_bf16((float)src[i]);
    } else if (TYPE == F32) {
        float* p = (float*)dst + offset;
        for (; i < n; ++i) p[i] = (float)src[i];
    } else {
        double* p = (double*)dst + offset;
        for (; i < n; ++i) p[i] = (double)src[i];
    }
}

// d[c * repeat + r] = run[c] for c < len, r < repeat: with the usual multipliers
// known at compile time, so the copy vectorizes (a run-time repeat left a
// per-channel loop that took half of dwf_mult2).
template <int R, class T>
static inline void repeat_run_t(T* d, const T* run, idx len) {
    for (idx c = 0; c < len; ++c)
        for (int r = 0; r < R; ++r) d[c * R + r] = run[c];
}

template <class T>
static inline void repeat_run(T* d, const T* run, idx len, idx repeat) {
    switch (repeat) {
        case 1: std::memcpy(d, run, (std::size_t)len * sizeof(T)); return;
        case 2: return repeat_run_t<2>(d, run, len);
        case 3: return repeat_run_t<3>(d, run, len);
        case 4: return repeat_run_t<4>(d, run, len);
        default:
            for (idx c = 0; c < len; ++c)
                for (idx r = 0; r < repeat; ++r) d[c * repeat + r] = run[c];
    }
}

// dst[i * dst_stride + c * repeat + r] = src[offset + i * s_outer + c * s_inner] for
// i < n_outer, c < n_inner, r < repeat: rows of pixels (i) by channels (c), each
// channel repeated `repeat` times (the depthwise multiplier), in the compute type.
// Channels-contiguous sources convert whole runs; channels-strided ones (NCHW)
// walk each channel's contiguous pixel run instead, so reads stay sequential.
template <class T, int TYPE>
static void gather_rows_t(T* dst, idx dst_stride, const void* src, idx offset, idx n_outer, idx s_outer,
                          idx n_inner, idx s_inner, idx repeat) {
    if (s_inner == 1 && repeat == 1) {
        if (s_outer == n_inner && dst_stride == n_inner) {  // rows packed on both sides: one run
            convert_run<T, TYPE>(dst, src, offset, n_outer * n_inner);
            return;
        }
        for (idx i = 0; i < n_outer; ++i) convert_run<T, TYPE>(dst + i * dst_stride, src, offset + i * s_outer, n_inner);
        return;
    }
    if (s_inner == 1) {
        T run[256];
        for (idx i = 0; i < n_outer; ++i)
            for (idx c0 = 0; c0 < n_inner; c0 += 256) {
                const idx len = n_inner - c0 < 256 ? n_inner - c0 : 256;
                convert_run<T, TYPE>(run, src, offset + i * s_outer + c0, len);
                repeat_run<T>(dst + i * dst_stride + c0 * repeat, run, len, repeat);
            }
        return;
    }
    if (s_outer >= s_inner * n_inner) {
        // Each pixel's channels lie together, s_inner apart (NHWC with every
        // M-th channel, as the input gradient stages one multiplier's dy): pixel
        // by pixel, so reads and writes stay sequential (channel by channel, each
        // access strode a pixel: 60% of dwi_mult2).
        for (idx i = 0; i < n_outer; ++i) {
            T* d = dst + i * dst_stride;
            const idx from = offset + i * s_outer;
            for (idx c = 0; c < n_inner; ++c) {
                const T v = load_as<T>(src, TYPE, from + c * s_inner);
                for (idx r = 0; r < repeat; ++r) d[c * repeat + r] = v;
            }
        }
        return;
    }
    // Channels-strided (NCHW): whole B x B blocks move through a register transpose.
    typedef Simd<T> S;
    constexpr idx B = S::TBLOCK;
    idx c_done = 0;
    if constexpr (B > 0) {
        if (s_outer == 1 && repeat == 1) {
            T block[B * B];
            const idx i_full = n_outer / B * B;
            for (; c_done + B <= n_inner; c_done += B) {
                for (idx i0 = 0; i0 < i_full; i0 += B) {
                    const idx from = offset + c_done * s_inner + i0;
                    if (TYPE == (sizeof(T) == 4 ? F32 : F64)) {
                        S::transpose((const T*)src + from, s_inner, dst + i0 * dst_stride + c_done, dst_stride);
                    } else {
                        for (idx c = 0; c < B; ++c) convert_run<T, TYPE>(block + c * B, src, from + c * s_inner, B);
                        S::transpose(block, B, dst + i0 * dst_stride + c_done, dst_stride);
                    }
                }
                for (idx c = c_done; c < c_done + B; ++c)  // the last pixels of these channels
                    for (idx i = i_full; i < n_outer; ++i)
                        dst[i * dst_stride + c] = load_as<T>(src, TYPE, offset + c * s_inner + i);
            }
        }
    }
    T run[256];
    for (idx c = c_done; c < n_inner; ++c)
        for (idx i0 = 0; i0 < n_outer; i0 += 256) {
            const idx len = n_outer - i0 < 256 ? n_outer - i0 : 256;
            if (s_outer == 1) {
                convert_run<T, TYPE>(run, src, offset + c * s_inner + i0, len);
            } else {
                for (idx i = 0; i < len; ++i) run[i] = load_as<T>(src, TYPE, offset + c * s_inner + (i0 + i) * s_outer);
            }
            for (idx i = 0; i < len; ++i)
                for (idx r = 0; r < repeat; ++r) dst[(i0 + i) * dst_stride + c * repeat + r] = run[i];
        }
}

// Channels [0, width) of n_pixels pixels already in the compute type (pixel pitch
// `pitch` at src) into dst, `block` elements a pixel: whole vectors where the
// block is full (gather_rows would call memcpy for every pixel), element by
// element otherwise.  The blocked stages of the input and filter gradients.
template <class T>
static inline void copy_channel_block(T* dst, idx block, const T* src, idx pitch, idx n_pixels, idx width) {
    typedef Simd<T> S;
    if (width == block && block % S::V == 0) {
        for (idx p = 0; p < n_pixels; ++p)
            for (idx q = 0; q < block; q += S::V) S::store(dst + p * block + q, S::load(src + p * pitch + q));
        return;
    }
    for (idx p = 0; p < n_pixels; ++p)
        for (idx q = 0; q < width; ++q) dst[p * block + q] = src[p * pitch + q];
}

template <class T>
static void gather_rows(T* dst, idx dst_stride, const void* src, int type, idx offset, idx n_outer, idx s_outer,
                        idx n_inner, idx s_inner, idx repeat = 1) {
    switch (type) {
        case F16: gather_rows_t<T, F16>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
        case BF16: gather_rows_t<T, BF16>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
        case F32: gather_rows_t<T, F32>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
        default: gather_rows_t<T, F64>(dst, dst_stride, src, offset, n_outer, s_outer, n_inner, s_inner, repeat); break;
    }
}

// dst[offset + i * d_outer + c * d_inner] (of TYPE) = src[i * src_stride + c], the inverse layout move.
template <class T, int TYPE>
static void scatter_rows_t(void* dst, idx offset, idx n_outer, idx d_outer, idx n_inner, idx d_inner,
                           const T* src, idx src_stride) {
    if (d_inner == 1) {
        for (idx i = 0; i < n_outer; ++i) store_run<T, TYPE>(dst, offset + i * d_outer, src + i * src_stride, n_inner);
        return;
    }
    // Channels-strided (NCHW): whole B x B blocks move through a register transpose.
    typedef Simd<T> S;
    constexpr idx B = S::TBLOCK;
    idx c_done = 0;
    if constexpr (B > 0) {
        if (d_outer == 1) {
            T block[B * B];
            const idx i_full = n_outer / B * B;
            for (; c_done + B <= n_inner; c_done += B) {
                for (idx i0 = 0; i0 < i_full; i0 += B) {
                    const idx to = offset + c_done * d_inner + i0;
                    if (TYPE == (sizeof(T) == 4 ? F32 : F64)) {
                        S::transpose(src + i0 * src_stride + c_done, src_stride, (T*)dst + to, d_inner);
                    } else {
                        S::transpose(src + i0 * src_stride + c_done, src_stride, block, B);
                        for (idx c = 0; c < B; ++c) store_run<T, TYPE>(dst, to + c * d_inner, block + c * B, B);
                    }
                }
                for (idx c = c_done; c < c_done + B; ++c)  // the last pixels of these channels
                    for (idx i = i_full; i < n_outer; ++i)
                        store_as<T>(dst, TYPE, offset + c * d_inner + i, src[i * src_stride + c]);
            }
        }
    }
    T run[256];
    for (idx c = c_done; c < n_inner; ++c)
        for (idx i0 = 0; i0 < n_outer; i0 += 256) {
            const idx len = n_outer - i0 < 256 ? n_outer - i0 : 256;
            for (idx i = 0; i < len; ++i) run[i] = src[(i0 + i) * src_stride + c];
            if (d_outer == 1) {
                store_run<T, TYPE>(dst, offset + c * d_inner + i0, run, len);
            } else {
                for (idx i = 0; i < len; ++i) store_as<T>(dst, TYPE, offset + c * d_inner + (i0 + i) * d_outer, run[i]);
            }
        }
}

template <class T>
static void scatter_rows(void* dst, int type, idx offset, idx n_outer, idx d_outer, idx n_inner, idx d_inner,
                         const T* src, idx src_stride) {
    switch (type) {
        case F16: scatter_rows_t<T, F16>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
        case BF16: scatter_rows_t<T, BF16>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
        case F32: scatter_rows_t<T, F32>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
        default: scatter_rows_t<T, F64>(dst, offset, n_outer, d_outer, n_inner, d_inner, src, src_stride); break;
    }
}
