// racecheck.h: the race check (EMU_RACECHECK=1) as the emulator's runtime sees it: the clocks
// emu.cpp keeps for stream operations, the memory the check shadows, the hooks emu_exec.cpp
// calls as a block runs, and the entry race_tsan.cpp passes the instrumented accesses to.
// racecheck.cpp says how the check works.
#pragma once
#include "emu_internal.h"

#include <vector>

namespace emu {

// A vector clock over the streams (slot 0 is the legacy default stream): t[s] = n means the
// first n operations queued on stream s come before.
struct VClock {
    std::vector<uint32_t> t;
    void join(const VClock& o);
    uint32_t tick(uint32_t slot);  // the number of the next operation on slot
};

// A stream operation's place in the order: its stream's slot, its number there (from 1), and
// the clock of everything that comes before it, itself included.
struct OpClock {
    uint32_t slot = 0, seq = 0;
    VClock vc;
};

// The clocks of the stream operations, which emu.cpp keeps at each call, under its mutex, so
// that they follow the order of the calls whatever the timing of the streams' threads
struct StreamClock {
    uint32_t slot = 0;
    bool blocking = true;  // synchronises with the legacy stream
    VClock vc;             // what the stream's next operation comes after
};
struct RaceClocks {
    VClock host;         // what the host has synchronised with: operations queued later come after
    StreamClock legacy;  // the legacy default stream's, slot 0
    std::vector<StreamClock*> streams;
    uint32_t slots = 1;
    void created(StreamClock* s, bool blocking);
    void destroyed(StreamClock* s);
    // the operation queued on s now, with its number and clock, to run with them
    Op clocked(StreamClock* s, const char* what, Op op);
    // what an action queued on s now comes after (on the legacy stream: the blocking streams' work too)
    VClock before(const StreamClock* s) const;
    // the host knows that the work s queued so far is done (the legacy stream's: with the
    // blocking streams'; all: every stream's)
    void host_knows(const StreamClock* s, bool all = false);
};

// Turns the check on (emu.cpp, once, when EMU_RACECHECK=1): reserves the shadowed memory;
// stops the program when it was built without the instrumentation.
void race_enable();

// device memory while the check is on (cudaMalloc, cudaFree); nullptr when the arena is full
void* race_device_alloc(size_t bytes);
void race_device_free(void* p);

// around every stream operation, on the host thread that runs it
void race_op_begin(const OpClock* clock, const char* what);
void race_op_end();

// a kernel under the check: run_grid on the calling host thread alone, the accesses checked
void race_run_grid(const LaunchSpec& spec, const std::function<void()>& body, Order order);

// a block of that grid (emu_exec.cpp): nullptr when no checked grid runs on this host thread
RaceBlock* race_block_begin(uint64_t block_linear, int nthreads);
void race_block_end(RaceBlock* b);
void race_barrier(RaceBlock* b);                       // __syncthreads released
void race_warp_op(RaceBlock* b, int warp, unsigned mask);  // a warp operation completed
void* race_shared_alloc(size_t bytes, size_t align);   // the running block's shared memory

// the instrumented code's accesses (race_tsan.cpp)
enum RaceKind : uint8_t {
    RACE_READ,
    RACE_WRITE,
    RACE_ATOMIC,       // an atomic read-modify-write or store
    RACE_ATOMIC_LOAD,
    RACE_ASYNC,        // a cp.async's destination, at its issue
    RACE_ASYNC_DONE,   // ... at the wait_group that completes it
};
extern bool race_instrumented;  // set by __tsan_init, which each instrumented file's constructor calls
extern uintptr_t race_base;
extern size_t race_size;  // 0 while the check is off, so that every address is outside
void race_kernel_access(uintptr_t off, size_t bytes, RaceKind kind);
inline void race_access(const void* p, size_t bytes, RaceKind kind) {
    const uintptr_t off = (uintptr_t)p - race_base;
    if (off < race_size && tls_thread != nullptr) race_kernel_access(off, bytes, kind);
}

}  // namespace emu
