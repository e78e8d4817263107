# Declarations of the C++ kernels in cvz_kernels.hpp, shared by the modules.
cdef extern from "cvz_kernels.hpp" namespace "cvz":
    ctypedef Py_ssize_t idx

    cdef struct InputGradArgs:
        idx N, H, W, Cin, OH, OW, Cout, KH, KW, G, cin_g, cout_g
        idx sh, sw, dh, dw, pt, pl
        const void* dy
        int dy_type
        idx dy_s[4]
        void* dx
        int dx_type
        idx dx_s[4]
        const void* w
        int w_type
        idx w_s[4]
        idx V, cin_g_pad, ow_lo, ow_span, scratch_elems
        int direct
        void* packed

    cdef struct FilterGradArgs:
        idx N, H, W, C, M, OH, OW, KH, KW
        idx sh, sw, dh, dw, pt, pl
        const void* x
        int x_type
        idx x_s[4]
        const void* dy
        int dy_type
        idx dy_s[4]
        void* out
        int out_type
        idx n_blocks
        idx V, cm, cm_pad, scratch_elems
        int direct
        void* partial

cdef extern from "cvz_kernels.hpp" nogil:
    int cvz_isa_best()
    int cvz_isa_compiled(int isa)
    void cvz_input_grad_prepare(InputGradArgs* a, int isa, int f64)
    void cvz_input_grad_pack(const InputGradArgs* a, int isa, int f64)
    void cvz_input_grad_row(const InputGradArgs* a, int isa, int f64, idx row, void* scratch)
    void cvz_filter_grad_prepare(FilterGradArgs* a, int isa, int f64)
    void cvz_filter_grad_block(const FilterGradArgs* a, int isa, int f64, idx block, void* scratch,
                               const idx* ow_first, const idx* ow_last)
    void cvz_filter_grad_merge(const FilterGradArgs* a, int isa, int f64, idx tap_begin, idx tap_end)
    void* cvz_alloc(size_t bytes)
    void cvz_free(void* p)
