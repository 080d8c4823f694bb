// kernel_occupancy_ref.cpp: NVIDIA's occupancy calculator (include/cuda_occupancy.h of the CUDA
// toolkit: host code only, no GPU, no CUDA runtime) on an H100, the reference that
// test/test_kernel_resources.sh checks scripts/kernel_resources.py's arithmetic against.
// stdin: one launch a line, "regs block smem_static smem_dyn barriers" (bytes per block).
// stdout: one line each, "blocks N limit A+B" with the limits named and ordered as the script
// names them (warps, blocks, regs, smem, barriers), or "error N" when the calculator refuses.
// Build: g++ -std=c++17 -I<cuda>/include test/kernel_occupancy_ref.cpp (not a test_*.cpp: the
// Makefile builds those for every machine, and this one needs the toolkit's header).
#include <cstdio>
#include <string>
#include "cuda_occupancy.h"  // defines: cudaOccMaxActiveBlocksPerMultiprocessor, cudaOccDeviceProp, ...

int main() {
    // the H100 SXM5 as cudaGetDeviceProperties describes it (compute capability 9.0)
    cudaOccDeviceProp prop;
    prop.computeMajor = 9;
    prop.computeMinor = 0;
    prop.maxThreadsPerBlock = 1024;
    prop.maxThreadsPerMultiprocessor = 2048;
    prop.regsPerBlock = 65536;
    prop.regsPerMultiprocessor = 65536;
    prop.warpSize = 32;
    prop.sharedMemPerBlock = (size_t)48 * 1024;
    prop.sharedMemPerMultiprocessor = (size_t)228 * 1024;
    prop.numSms = 132;
    prop.sharedMemPerBlockOptin = (size_t)227 * 1024;
    prop.reservedSharedMemPerBlock = 1024;
    cudaOccDeviceState state;  // the default carveout, as the trainer leaves it

    int regs, block, barriers;
    size_t smem_static, smem_dyn;
    while (scanf("%d %d %zu %zu %d", &regs, &block, &smem_static, &smem_dyn, &barriers) == 5) {
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = 1024;
        attr.numRegs = regs;
        attr.sharedSizeBytes = smem_static;
        attr.partitionedGCConfig = PARTITIONED_GC_OFF;
        // the launchers raise a kernel's dynamic limit to what it asks for when that is above 48 KB
        attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = smem_dyn;
        attr.numBlockBarriers = barriers;
        attr.virtualResourceCount = 0;
        cudaOccResult result;
        cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, block, smem_dyn);
        if (err != CUDA_OCC_SUCCESS) {
            printf("error %d\n", (int)err);
            continue;
        }
        // the limits equal to the result (not result.limitingFactors: it keeps the bits of the
        // limits met before the barrier limit, also when the barrier limit is the lower one)
        const struct { int blocks; const char* name; } limits[] = {
            {result.blockLimitWarps, "warps"}, {result.blockLimitBlocks, "blocks"}, {result.blockLimitRegs, "regs"},
            {result.blockLimitSharedMem, "smem"}, {result.blockLimitBarriers, "barriers"}};
        std::string limit;
        for (const auto& l : limits)
            if (l.blocks == result.activeBlocksPerMultiprocessor)
                limit += (limit.empty() ? "" : "+") + std::string(l.name);
        printf("blocks %d limit %s\n", result.activeBlocksPerMultiprocessor, limit.c_str());
    }
    return 0;
}
