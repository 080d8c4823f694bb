// emu_internal.h: what the emulated GPU's own files share (not for the sources it runs).
#pragma once
#include "emu.h"

namespace emu {

enum OrderKind { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE };
struct Order {
    OrderKind kind;
    uint64_t seed;
};

// 48 KB of shared memory a block unless cudaFuncSetAttribute raised it; at most the H100's
// 227 KB (sharedMemPerBlockOptin)
constexpr size_t SMEM_DEFAULT_LIMIT = 48 << 10;
constexpr size_t SMEM_OPTIN_LIMIT = 227 << 10;

// the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize (SMEM_DEFAULT_LIMIT if never set)
size_t kernel_max_dynamic_smem(const void* kernel);

// runs every block of the grid, threads and blocks in order's order: on the calling host
// thread and a team of helpers, or (one_thread) on the calling thread alone, block after block
void run_grid(const LaunchSpec& spec, const std::function<void()>& body, Order order, bool one_thread = false);

}  // namespace emu
