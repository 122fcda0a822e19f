//! The CUDA C source of every kernel, generated from the operator enums and compiled once per
//! process by NVRTC.
//!
//! One kernel per operator and layout (rather than one kernel with a switch) so that each inner
//! loop is as tight as the CPU's monomorphised closures. Operator semantics follow the CPU
//! kernels: IEEE arithmetic, comparisons give `1.0`/`0.0`, `relu` keeps NaN, max/min propagate
//! NaN, argmax picks the first maximum or the first NaN. Transcendentals (`expf`, `logf`, ...)
//! are CUDA's, within a few ulp of the CPU's.
//!
//! The parameter structs mirror `geometry::{StridedParams, BroadcastParams}` field for field.

use std::fmt::Write;

use crate::tensor::{BinaryOp, ReduceOp, UnaryOp};

/// The expression of a unary function of `x`.
pub(crate) fn unary_expr(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-x",
        UnaryOp::Exp => "expf(x)",
        UnaryOp::Log => "logf(x)",
        UnaryOp::Sqrt => "sqrtf(x)",
        UnaryOp::Tanh => "tanhf(x)",
        UnaryOp::Sigmoid => "1.0f / (1.0f + expf(-x))",
        UnaryOp::Relu => "(x > 0.0f || x != x ? x : 0.0f)",
        UnaryOp::Abs => "fabsf(x)",
    }
}

/// The expression of a binary operator of `a` and `b`.
pub(crate) fn binary_expr(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "a + b",
        BinaryOp::Sub => "a - b",
        BinaryOp::Mul => "a * b",
        BinaryOp::Div => "a / b",
        BinaryOp::Pow => "powf(a, b)",
        BinaryOp::Lt => "(a < b ? 1.0f : 0.0f)",
        BinaryOp::Le => "(a <= b ? 1.0f : 0.0f)",
        BinaryOp::Gt => "(a > b ? 1.0f : 0.0f)",
        BinaryOp::Ge => "(a >= b ? 1.0f : 0.0f)",
        BinaryOp::Eq => "(a == b ? 1.0f : 0.0f)",
        BinaryOp::Ne => "(a != b ? 1.0f : 0.0f)",
    }
}

/// The kernel layouts of a binary operator, as suffixes of its kernel names.
pub(crate) const BINARY_LAYOUTS: [&str; 4] = ["same", "scalar_rhs", "scalar_lhs", "bcast"];

/// The name of the unary kernel for `op`.
pub(crate) fn unary_kernel(op: UnaryOp) -> String {
    format!("unary_{}", op.name())
}

/// The name of the binary kernel for `op` in `layout` (one of [`BINARY_LAYOUTS`]).
pub(crate) fn binary_kernel(op: BinaryOp, layout: &str) -> String {
    format!("binary_{}_{layout}", op.name())
}

/// The name of a reduction kernel: `kind` is `rows` or `per_output`.
pub(crate) fn reduce_kernel(op: ReduceOp, kind: &str) -> String {
    format!("reduce_{kind}_{}", op.name())
}

/// Kernels that exist once, not per operator.
pub(crate) const FIXED_KERNELS: [&str; 10] = [
    "fill",
    "arange",
    "eye",
    "spin",
    "strided_copy",
    "softmax_lanes",
    "onehot",
    "rand_philox",
    "randn_philox",
    "matmul_tiled",
];

/// Every kernel name the source defines, in source order.
pub(crate) fn kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    names.extend(UnaryOp::ALL.iter().map(|&op| unary_kernel(op)));
    for op in BinaryOp::ALL {
        names.extend(
            BINARY_LAYOUTS
                .iter()
                .map(|layout| binary_kernel(op, layout)),
        );
    }
    for op in ReduceOp::ALL {
        names.push(reduce_kernel(op, "rows"));
        names.push(reduce_kernel(op, "per_output"));
    }
    names.extend(FIXED_KERNELS.iter().map(|name| name.to_string()));
    names
}

const PRELUDE: &str = r#"
typedef unsigned long long u64;
#define MAX_DIMS 8
// NVRTC includes no headers: no INFINITY, and isnan is spelled out (no fast-math here, so a NaN
// is exactly the value that differs from itself).
#define DEP_INF __int_as_float(0x7f800000)
__device__ __forceinline__ bool dep_isnan(float x) { return x != x; }
#define GRID_STRIDE(i, n) for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (u64)gridDim.x * blockDim.x)

struct Strided { u64 ndim, n, src_offset, dst_offset; u64 shape[MAX_DIMS]; u64 src_strides[MAX_DIMS]; u64 dst_strides[MAX_DIMS]; };
struct Bcast { u64 ndim, n; u64 shape[MAX_DIMS]; u64 a_strides[MAX_DIMS]; u64 b_strides[MAX_DIMS]; };
struct Acc { float v; u64 i; };

extern "C" __global__ void fill(float* y, float value, u64 n) { GRID_STRIDE(i, n) y[i] = value; }
extern "C" __global__ void arange(float* y, u64 n) { GRID_STRIDE(i, n) y[i] = (float)i; }
extern "C" __global__ void eye(float* y, u64 n) { GRID_STRIDE(i, n * n) y[i] = (i / n == i % n) ? 1.0f : 0.0f; }
// work(ms) on a GPU: one thread keeps the stream busy for ns nanoseconds of the GPU's global timer.
extern "C" __global__ void spin(u64 ns) {
  u64 start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}

extern "C" __global__ void strided_copy(const float* x, float* y, Strided p) {
    GRID_STRIDE(i, p.n) {
        u64 rem = i, src = p.src_offset, dst = p.dst_offset;
        for (int d = (int)p.ndim - 1; d >= 0; --d) {
            u64 c = rem % p.shape[d];
            rem /= p.shape[d];
            src += c * p.src_strides[d];
            dst += c * p.dst_strides[d];
        }
        y[dst] = x[src];
    }
}

extern "C" __global__ void softmax_lanes(const float* x, float* y, u64 outer, u64 n, u64 inner) {
    GRID_STRIDE(t, outer * inner) {
        u64 base = (t / inner) * n * inner + t % inner;
        float m = -DEP_INF;
        for (u64 k = 0; k < n; ++k) {
            float v = x[base + k * inner];
            if (v > m || dep_isnan(v)) { m = v; if (dep_isnan(v)) break; }
        }
        float sum = 0.0f;
        for (u64 k = 0; k < n; ++k) {
            float e = expf(x[base + k * inner] - m);
            y[base + k * inner] = e;
            sum += e;
        }
        for (u64 k = 0; k < n; ++k) y[base + k * inner] /= sum;
    }
}

// y must be zero-filled; the host has checked every label.
extern "C" __global__ void onehot(const float* labels, float* y, u64 n, u64 classes) {
    GRID_STRIDE(i, n) y[i * classes + (u64)labels[i]] = 1.0f;
}

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
__device__ __forceinline__ uint4 philox_round(uint4 c, uint2 k) {
    unsigned hi0 = __umulhi(PHILOX_M0, c.x), lo0 = PHILOX_M0 * c.x;
    unsigned hi1 = __umulhi(PHILOX_M1, c.z), lo1 = PHILOX_M1 * c.z;
    return make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
}
__device__ uint4 philox4x32(u64 block, u64 seed) {
    uint4 c = make_uint4((unsigned)block, (unsigned)(block >> 32), 0u, 0u);
    uint2 k = make_uint2((unsigned)seed, (unsigned)(seed >> 32));
    c = philox_round(c, k);
    for (int r = 1; r < 10; ++r) { k.x += PHILOX_W0; k.y += PHILOX_W1; c = philox_round(c, k); }
    return c;
}
__device__ __forceinline__ float u01(unsigned w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

extern "C" __global__ void rand_philox(float* y, u64 n, u64 seed, u64 first_block) {
    GRID_STRIDE(j, (n + 3) / 4) {
        uint4 w = philox4x32(first_block + j, seed);
        unsigned words[4] = {w.x, w.y, w.z, w.w};
        for (int q = 0; q < 4; ++q) if (4 * j + q < n) y[4 * j + q] = u01(words[q]);
    }
}

extern "C" __global__ void randn_philox(float* y, u64 n, u64 seed, u64 first_block) {
    GRID_STRIDE(j, (n + 3) / 4) {
        uint4 w = philox4x32(first_block + j, seed);
        unsigned words[4] = {w.x, w.y, w.z, w.w};
        for (int q = 0; q < 4; q += 2) {
            float u1 = 1.0f - u01(words[q]);
            float u2 = u01(words[q + 1]);
            float r = sqrtf(-2.0f * logf(u1));
            float theta = 6.28318530717958647692f * u2;
            if (4 * j + q < n) y[4 * j + q] = r * cosf(theta);
            if (4 * j + q + 1 < n) y[4 * j + q + 1] = r * sinf(theta);
        }
    }
}

// The fallback matrix product when cuBLAS cannot be loaded: row-major C(m x n) = A(m x k) B(k x n).
#define TILE 16
extern "C" __global__ void matmul_tiled(const float* a, const float* b, float* c, u64 m, u64 n, u64 k) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    u64 row = (u64)blockIdx.y * TILE + threadIdx.y, col = (u64)blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (u64 t = 0; t < k; t += TILE) {
        as[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
        for (int q = 0; q < TILE; ++q) acc += as[threadIdx.y][q] * bs[q][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}
"#;

/// The pieces of one reduction: identity, combine (for the block tree) and the final value.
struct ReduceParts {
    identity: &'static str,
    combine: &'static str,
    finish: &'static str,
    /// The body of the one-thread-per-output kernel over `p[k * inner]`, writing `y[t]`.
    per_output: &'static str,
}

fn reduce_parts(op: ReduceOp) -> ReduceParts {
    const SUM: &str = "a.v += b.v; return a;";
    const SUM_BODY: &str =
        "float acc = 0.0f; for (u64 k = 0; k < n; ++k) acc += p[k * inner]; y[t] = acc / divisor;";
    match op {
        ReduceOp::Sum | ReduceOp::Mean => ReduceParts {
            identity: "{0.0f, 0ull}",
            combine: SUM,
            finish: "acc.v / divisor",
            per_output: SUM_BODY,
        },
        ReduceOp::Max => ReduceParts {
            identity: "{-DEP_INF, ~0ull}",
            combine: "if (dep_isnan(a.v)) return a; if (dep_isnan(b.v)) return b; return b.v > a.v ? b : a;",
            finish: "acc.v",
            per_output: "float m = p[0]; for (u64 k = 1; k < n; ++k) { float v = p[k * inner]; if (!dep_isnan(m) && (dep_isnan(v) || v >= m)) m = v; } y[t] = m;",
        },
        ReduceOp::Min => ReduceParts {
            identity: "{DEP_INF, ~0ull}",
            combine: "if (dep_isnan(a.v)) return a; if (dep_isnan(b.v)) return b; return b.v < a.v ? b : a;",
            finish: "acc.v",
            per_output: "float m = p[0]; for (u64 k = 1; k < n; ++k) { float v = p[k * inner]; if (!dep_isnan(m) && (dep_isnan(v) || v <= m)) m = v; } y[t] = m;",
        },
        ReduceOp::Argmax => ReduceParts {
            identity: "{-DEP_INF, ~0ull}",
            // A total order, so the tree gives the sequential answer: NaN beats numbers, a larger
            // value beats a smaller one, and among equals the earlier index wins.
            combine: "bool an = dep_isnan(a.v), bn = dep_isnan(b.v); \
                      if (an || bn) { if (an && bn) return b.i < a.i ? b : a; return an ? a : b; } \
                      return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;",
            finish: "(index_as_value ? (float)acc.i : acc.v)",
            per_output: "float best = p[0]; u64 at = 0; for (u64 k = 1; k < n; ++k) { float v = p[k * inner]; if (!dep_isnan(best) && (dep_isnan(v) || v > best)) { best = v; at = k; } } y[t] = (float)at;",
        },
    }
}

/// The complete kernel source.
pub(crate) fn kernel_source() -> String {
    let mut src = String::from(PRELUDE);
    for op in UnaryOp::ALL {
        let _ = writeln!(
            src,
            "extern \"C\" __global__ void {name}(const float* xs, float* y, u64 n) {{ GRID_STRIDE(i, n) {{ float x = xs[i]; y[i] = {expr}; }} }}",
            name = unary_kernel(op),
            expr = unary_expr(op),
        );
    }
    for op in BinaryOp::ALL {
        let name = op.name();
        let expr = binary_expr(op);
        let _ = writeln!(
            src,
            "__device__ __forceinline__ float op_{name}(float a, float b) {{ return {expr}; }}\n\
             extern \"C\" __global__ void binary_{name}_same(const float* x, const float* z, float* y, u64 n) {{ GRID_STRIDE(i, n) y[i] = op_{name}(x[i], z[i]); }}\n\
             extern \"C\" __global__ void binary_{name}_scalar_rhs(const float* x, float b, float* y, u64 n) {{ GRID_STRIDE(i, n) y[i] = op_{name}(x[i], b); }}\n\
             extern \"C\" __global__ void binary_{name}_scalar_lhs(float a, const float* z, float* y, u64 n) {{ GRID_STRIDE(i, n) y[i] = op_{name}(a, z[i]); }}\n\
             extern \"C\" __global__ void binary_{name}_bcast(const float* x, const float* z, float* y, Bcast p) {{\n\
             \x20   GRID_STRIDE(i, p.n) {{\n\
             \x20       u64 rem = i, oa = 0, ob = 0;\n\
             \x20       for (int d = (int)p.ndim - 1; d >= 0; --d) {{ u64 c = rem % p.shape[d]; rem /= p.shape[d]; oa += c * p.a_strides[d]; ob += c * p.b_strides[d]; }}\n\
             \x20       y[i] = op_{name}(x[oa], z[ob]);\n\
             \x20   }}\n\
             }}"
        );
    }
    for op in ReduceOp::ALL {
        let name = op.name();
        let parts = reduce_parts(op);
        let _ = writeln!(
            src,
            "__device__ __forceinline__ Acc combine_{name}(Acc a, Acc b) {{ {combine} }}\n\
             extern \"C\" __global__ void reduce_rows_{name}(const float* x, const u64* x_idx, float* y, u64* y_idx, u64 rows, u64 row_len, u64 total, int global_idx, float divisor, int index_as_value) {{\n\
             \x20   __shared__ float sv[256];\n\
             \x20   __shared__ u64 si[256];\n\
             \x20   for (u64 r = blockIdx.x; r < rows; r += gridDim.x) {{\n\
             \x20       u64 start = r * row_len, end = start + row_len;\n\
             \x20       if (end > total) end = total;\n\
             \x20       Acc acc = {identity};\n\
             \x20       for (u64 k = start + threadIdx.x; k < end; k += blockDim.x) {{\n\
             \x20           Acc e; e.v = x[k]; e.i = x_idx ? x_idx[k] : (global_idx ? k : k - start);\n\
             \x20           acc = combine_{name}(acc, e);\n\
             \x20       }}\n\
             \x20       sv[threadIdx.x] = acc.v; si[threadIdx.x] = acc.i;\n\
             \x20       __syncthreads();\n\
             \x20       for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {{\n\
             \x20           if (threadIdx.x < s) {{\n\
             \x20               Acc a = {{sv[threadIdx.x], si[threadIdx.x]}}, b = {{sv[threadIdx.x + s], si[threadIdx.x + s]}};\n\
             \x20               a = combine_{name}(a, b); sv[threadIdx.x] = a.v; si[threadIdx.x] = a.i;\n\
             \x20           }}\n\
             \x20           __syncthreads();\n\
             \x20       }}\n\
             \x20       if (threadIdx.x == 0) {{ acc.v = sv[0]; acc.i = si[0]; y[r] = {finish}; if (y_idx) y_idx[r] = acc.i; }}\n\
             \x20       __syncthreads();\n\
             \x20   }}\n\
             }}\n\
             extern \"C\" __global__ void reduce_per_output_{name}(const float* x, float* y, u64 outer, u64 n, u64 inner, float divisor) {{\n\
             \x20   GRID_STRIDE(t, outer * inner) {{ const float* p = x + (t / inner) * n * inner + t % inner; {per_output} }}\n\
             }}",
            combine = parts.combine,
            identity = parts.identity,
            finish = parts.finish,
            per_output = parts.per_output,
        );
    }
    src
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_kernel_is_defined_once() {
        let src = kernel_source();
        let names = kernel_names();
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "kernel names are unique");
        for name in &names {
            let definition = format!("__global__ void {name}(");
            assert_eq!(src.matches(&definition).count(), 1, "{name}");
        }
        assert_eq!(
            src.matches("extern \"C\" __global__").count(),
            names.len(),
            "no kernel without a name on the Rust side"
        );
    }

    #[test]
    fn the_source_is_balanced() {
        let src = kernel_source();
        for (open, close) in [('{', '}'), ('(', ')'), ('[', ']')] {
            assert_eq!(
                src.matches(open).count(),
                src.matches(close).count(),
                "{open}{close}"
            );
        }
    }

    #[test]
    fn operators_follow_the_cpu_semantics() {
        assert_eq!(binary_expr(BinaryOp::Ne), "(a != b ? 1.0f : 0.0f)");
        assert_eq!(
            unary_expr(UnaryOp::Relu),
            "(x > 0.0f || x != x ? x : 0.0f)",
            "keeps NaN like the CPU"
        );
        let src = kernel_source();
        assert!(src.contains("binary_pow_bcast(const float* x, const float* z, float* y, Bcast p)"));
        assert!(src.contains("y[i] = op_pow(x[i], b);"));
        assert!(src.contains(
            "__device__ __forceinline__ float op_pow(float a, float b) { return powf(a, b); }"
        ));
    }

    #[test]
    fn parameter_structs_match_their_rust_layout() {
        use super::super::geometry::{BroadcastParams, StridedParams, MAX_DIMS};
        let src = kernel_source();
        assert!(src.contains("struct Strided { u64 ndim, n, src_offset, dst_offset; u64 shape[MAX_DIMS]; u64 src_strides[MAX_DIMS]; u64 dst_strides[MAX_DIMS]; };"));
        assert!(src.contains("struct Bcast { u64 ndim, n; u64 shape[MAX_DIMS]; u64 a_strides[MAX_DIMS]; u64 b_strides[MAX_DIMS]; };"));
        assert!(src.contains(&format!("#define MAX_DIMS {MAX_DIMS}")));
        assert_eq!(std::mem::size_of::<StridedParams>(), 8 * (4 + 3 * MAX_DIMS));
        assert_eq!(
            std::mem::size_of::<BroadcastParams>(),
            8 * (2 + 3 * MAX_DIMS)
        );
    }

    #[test]
    fn philox_constants_match_the_host_reference() {
        use super::super::philox::{M0, M1, W0, W1};
        let src = kernel_source();
        for (name, value) in [("M0", M0), ("M1", M1), ("W0", W0), ("W1", W1)] {
            assert!(
                src.contains(&format!("#define PHILOX_{name} 0x{value:X}u")),
                "{name}"
            );
        }
    }

    #[test]
    fn reductions_share_one_block_size_with_the_launcher() {
        let src = kernel_source();
        assert!(src.contains("__shared__ float sv[256];"));
        assert_eq!(super::super::geometry::BLOCK, 256);
        assert!(src.contains("__global__ void reduce_rows_argmax(const float* x, const u64* x_idx, float* y, u64* y_idx, u64 rows, u64 row_len, u64 total, int global_idx, float divisor, int index_as_value)"));
    }

    /// NVRTC is a compiler: it needs no GPU and no driver, so wherever libnvrtc is installed
    /// (e.g. `pip install nvidia-cuda-nvrtc-cu12` on the library path) the generated source is
    /// compiled for real, and every kernel must come out as a PTX entry point.
    #[test]
    fn the_source_compiles_with_nvrtc_when_it_is_installed() {
        if let Err(reason) = super::super::detect::probe_library("nvrtc", &["nvrtcGetPTX"]) {
            println!("skipped: no NVRTC ({reason})");
            return;
        }
        let compiled = std::panic::catch_unwind(|| {
            cudarc::nvrtc::compile_ptx_with_opts(kernel_source(), Default::default())
        })
        .expect("NVRTC loads");
        let ptx = match compiled {
            Ok(ptx) => ptx.to_src(),
            Err(error) => panic!("NVRTC rejected the kernel source: {error:?}"),
        };
        for name in kernel_names() {
            assert!(
                ptx.contains(&format!(".entry {name}(")),
                "{name} is not in the PTX"
            );
        }
    }
}
