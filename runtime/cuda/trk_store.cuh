/*
 * trk_store.cuh - how a fused kernel stores its float result as its output type (docs/BF16.md): float as is,
 * tr_bf16 rounded to nearest even (__float2bfloat16_rn), one element (put) or four at element 4*v (put4: one
 * 16-byte store as floats, one 8-byte store as bf16). Included by the kernel families of kernels.cu that write
 * a typed output (templates/kernels_rows.cu.in, kernels_gelu.cu.in).
 */
#ifndef TRK_STORE_CUH
#define TRK_STORE_CUH

#include <type_traits>

#include <cuda_bf16.h>

#include "trc.h"

namespace trk {
namespace store {

/* store v as OUT: float as is, tr_bf16 rounded to nearest even */
template <typename OUT>
__device__ __forceinline__ void put(OUT *p, float v)
{
    static_assert(std::is_same_v<OUT, float> || std::is_same_v<OUT, tr_bf16>, "kernel output: float or tr_bf16");
    if constexpr (std::is_same_v<OUT, float>)
        *p = v;
    else
        *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(v);
}

/* two bf16 (a at the lower address) as the bits of one __nv_bfloat162 */
__device__ __forceinline__ unsigned bf16x2_bits(float a, float b)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned *>(&h);
}

/* store the 4 values of o at element 4*v of p (16-byte aligned as floats, 8-byte as bf16) */
template <typename OUT>
__device__ __forceinline__ void put4(OUT *p, int v, float4 o)
{
    if constexpr (std::is_same_v<OUT, float>) {
        reinterpret_cast<float4 *>(p)[v] = o;
    } else {
        static_assert(std::is_same_v<OUT, tr_bf16>, "kernel output: float or tr_bf16");
        reinterpret_cast<uint2 *>(p)[v] = make_uint2(bf16x2_bits(o.x, o.y), bf16x2_bits(o.z, o.w));
    }
}

} // namespace store
} // namespace trk

#endif
