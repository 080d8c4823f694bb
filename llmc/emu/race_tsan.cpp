// race_tsan.cpp: the functions GCC's -fsanitize=thread instrumentation calls (its
// gcc/sanitizer.def lists them), defined for the race check (racecheck.cpp) instead of libtsan,
// which the race-check flavour never links (emu.mk). A plain access becomes a read or write of
// its bytes, an __atomic builtin an atomic access; each then does what the uninstrumented code
// would have done. Everything outside the shadowed memory, or outside a kernel, returns at the
// first test (race_access), so the instrumented host code runs at nearly its speed.
// Built without instrumentation, as every file of the emulator.
#include "racecheck.h"

#include <atomic>

using emu::race_access;

// 16 bytes under one lock (x86-64 has cmpxchg16b, but only with -mcx16 or libatomic)
typedef unsigned __int128 a128;
static std::atomic_flag lock128 = ATOMIC_FLAG_INIT;
template <typename F> static a128 locked128(volatile a128* a, F f) {
    race_access((const void*)a, 16, emu::RACE_ATOMIC);
    while (lock128.test_and_set(std::memory_order_acquire)) {
    }
    a128 old = *a;
    *a = f(old);
    lock128.clear(std::memory_order_release);
    return old;
}

extern "C" {

void __tsan_init() { emu::race_instrumented = true; }
// GCC emits these only without --param=tsan-instrument-func-entry-exit=0, which emu.mk gives
void __tsan_func_entry(void*) {}
void __tsan_func_exit(void*) {}
void __tsan_vptr_update(void**, void*) {}

#define EMU_TSAN_RW(N)                                                                       \
    void __tsan_read##N(void* p) { race_access(p, N, emu::RACE_READ); }                     \
    void __tsan_write##N(void* p) { race_access(p, N, emu::RACE_WRITE); }                   \
    void __tsan_unaligned_read##N(void* p) { race_access(p, N, emu::RACE_READ); }           \
    void __tsan_unaligned_write##N(void* p) { race_access(p, N, emu::RACE_WRITE); }         \
    void __tsan_volatile_read##N(void* p) { race_access(p, N, emu::RACE_READ); }            \
    void __tsan_volatile_write##N(void* p) { race_access(p, N, emu::RACE_WRITE); }
EMU_TSAN_RW(1)
EMU_TSAN_RW(2)
EMU_TSAN_RW(4)
EMU_TSAN_RW(8)
EMU_TSAN_RW(16)
#undef EMU_TSAN_RW
void __tsan_read_range(void* p, size_t n) { race_access(p, n, emu::RACE_READ); }
void __tsan_write_range(void* p, size_t n) { race_access(p, n, emu::RACE_WRITE); }

// Atomics: the memory order argument is ignored (every one is done sequentially consistent,
// which is at least what was asked). The 16-byte ones take a lock instead of needing libatomic.
#define EMU_TSAN_ATOMIC_RMW(N, T, NAME, EXPR)                                                \
    T __tsan_atomic##N##_##NAME(volatile T* a, T v, int) {                                  \
        race_access((const void*)a, sizeof(T), emu::RACE_ATOMIC);                           \
        return EXPR;                                                                         \
    }
#define EMU_TSAN_ATOMIC(N, T)                                                                                \
    T __tsan_atomic##N##_load(const volatile T* a, int) {                                                   \
        race_access((const void*)a, sizeof(T), emu::RACE_ATOMIC_LOAD);                                      \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                        \
    }                                                                                                        \
    void __tsan_atomic##N##_store(volatile T* a, T v, int) {                                                \
        race_access((const void*)a, sizeof(T), emu::RACE_ATOMIC);                                           \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                           \
    }                                                                                                        \
    EMU_TSAN_ATOMIC_RMW(N, T, exchange, __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST))                         \
    EMU_TSAN_ATOMIC_RMW(N, T, fetch_add, __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))                         \
    EMU_TSAN_ATOMIC_RMW(N, T, fetch_sub, __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST))                         \
    EMU_TSAN_ATOMIC_RMW(N, T, fetch_and, __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST))                         \
    EMU_TSAN_ATOMIC_RMW(N, T, fetch_or, __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST))                           \
    EMU_TSAN_ATOMIC_RMW(N, T, fetch_xor, __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST))                         \
    EMU_TSAN_ATOMIC_RMW(N, T, fetch_nand, __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST))                       \
    int __tsan_atomic##N##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                    \
        race_access((const void*)a, sizeof(T), emu::RACE_ATOMIC);                                           \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
    }                                                                                                        \
    int __tsan_atomic##N##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                      \
        race_access((const void*)a, sizeof(T), emu::RACE_ATOMIC);                                           \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
    }                                                                                                        \
    T __tsan_atomic##N##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                          \
        race_access((const void*)a, sizeof(T), emu::RACE_ATOMIC);                                           \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
        return c;                                                                                            \
    }
EMU_TSAN_ATOMIC(8, unsigned char)
EMU_TSAN_ATOMIC(16, unsigned short)
EMU_TSAN_ATOMIC(32, unsigned)
EMU_TSAN_ATOMIC(64, unsigned long long)
#undef EMU_TSAN_ATOMIC
#undef EMU_TSAN_ATOMIC_RMW

a128 __tsan_atomic128_load(const volatile a128* a, int) {
    return locked128(const_cast<volatile a128*>(a), [](a128 x) { return x; });
}
void __tsan_atomic128_store(volatile a128* a, a128 v, int) {
    locked128(a, [v](a128) { return v; });
}
a128 __tsan_atomic128_exchange(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128) { return v; });
}
a128 __tsan_atomic128_fetch_add(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128 x) { return x + v; });
}
a128 __tsan_atomic128_fetch_sub(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128 x) { return x - v; });
}
a128 __tsan_atomic128_fetch_and(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128 x) { return x & v; });
}
a128 __tsan_atomic128_fetch_or(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128 x) { return x | v; });
}
a128 __tsan_atomic128_fetch_xor(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128 x) { return x ^ v; });
}
a128 __tsan_atomic128_fetch_nand(volatile a128* a, a128 v, int) {
    return locked128(a, [v](a128 x) { return ~(x & v); });
}
int __tsan_atomic128_compare_exchange_strong(volatile a128* a, a128* c, a128 v, int, int) {
    const a128 want = *c;
    const a128 old = locked128(a, [want, v](a128 x) { return x == want ? v : x; });
    if (old == want) return 1;
    *c = old;
    return 0;
}
int __tsan_atomic128_compare_exchange_weak(volatile a128* a, a128* c, a128 v, int mo, int fmo) {
    return __tsan_atomic128_compare_exchange_strong(a, c, v, mo, fmo);
}

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"
