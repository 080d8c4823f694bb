// test_emu_semantics.cu: the emulated GPU (llmc/emu) against NVIDIA's documents where it once
// slipped (issue 22), one section each. Each expected value is worked out here from the section
// of the CUDA Programming Guide, the PTX ISA, the CUDA Math API or the Runtime API cited beside
// it, never taken from the emulator's output. Built for the emulator only (scripts/cu2cpp.py,
// emu.mk); test/test_emu.sh runs it.
//
// Each check prints PASS/FAIL; the exit code is the number of failures (capped). Every named check
// fails on the emulator before these fixes (666a58b) except those marked "control:", which held
// there too and guard the paths the fixes rewrote; atomicAdd(float2*)'s came later (the emulator
// had no float2 atomicAdd: the test did not build).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>
#include <cuda_runtime.h>

static int failures = 0;
static void check(bool ok, const char* what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (!ok) failures++;
}
#define OK(x) check((x) == cudaSuccess, #x)

// ---------------------------------------------------------------------------------------
// min and max. CUDA Math API (crt/math_functions.h): min/max are overloaded for int, unsigned,
// long, unsigned long, long long, unsigned long long, float and double, and the signed/unsigned
// mixes; "min(float a, float b) ... Behavior is equivalent to fminf()", and fminf (Single Precision
// Mathematical Functions) "If one argument is NaN, returns the numeric argument"; the mixed
// integer ones "perform integer promotion first": min(int, unsigned) compares as unsigned.
// They are __host__ __device__: host code in a .cu file calls the same ones.

struct MinMaxOut {
    float fmin_, fmax_, fnan;
    double dmax;
    size_t zmax, zmin;
    unsigned mixed;
    long long llmin_;
};

__global__ void minmax_kernel(MinMaxOut* out, float a, float b, size_t big, size_t small) {
    if (threadIdx.x != 0) return;
    out->fmin_ = min(a, b);
    out->fmax_ = max(a, b);
    out->fnan = min(nanf(""), b);
    out->dmax = max(1e300, 2.0);
    out->zmax = max(big, small);
    out->zmin = min(big, small);
    out->mixed = min(-1, 2u);
    out->llmin_ = min(-50000000000LL, 7LL);
}

// a kernel's host-side check as a foreign dev program wrote it: the largest error found
static float largest_error(const float* got, const float* want, int n) {
    float worst = 0.0f;
    for (int i = 0; i < n; i++) worst = max(worst, fabsf(got[i] - want[i]));
    return worst;
}

static void test_min_max() {
    MinMaxOut* d;
    OK(cudaMalloc(&d, sizeof(MinMaxOut)));
    const size_t big = 5000000000ULL;  // over 2^32: an int cannot hold it
    minmax_kernel<<<1, 32>>>(d, 1.5f, 2.75f, big, 3);
    MinMaxOut h;
    OK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
    check(h.fmin_ == 1.5f && h.fmax_ == 2.75f, "Math API: min/max(float, float) in a kernel keep the fraction (1.5, 2.75)");
    check(h.fnan == 2.75f, "Math API: min(NaN, 2.75f) is fminf's: the numeric argument");
    check(h.dmax == 1e300, "Math API: max(double, double) is fmax: 1e300");
    check(h.zmax == big && h.zmin == 3, "Math API: max/min(size_t, size_t) (unsigned long) in a kernel: 5e9 and 3");
    check(h.mixed == 2u, "Math API: min(int, unsigned) compares as unsigned: min(-1, 2u) == 2u");
    check(h.llmin_ == -50000000000LL, "Math API: min(long long, long long): -5e10");
    cudaFree(d);
    // the overload a call resolves to, as under nvcc
    check(std::is_same<decltype(min(1.0f, 2.0f)), float>::value &&
              std::is_same<decltype(max(1.0, 2.0)), double>::value &&
              std::is_same<decltype(max(1.0f, 2.0)), double>::value &&
              std::is_same<decltype(min((size_t)1, (size_t)2)), unsigned long>::value &&
              std::is_same<decltype(min(1, 2u)), unsigned>::value &&
              std::is_same<decltype(max(1LL, 2ULL)), unsigned long long>::value &&
              std::is_same<decltype(min(1, 2)), int>::value,
          "Math API: min/max return float, double, unsigned long, unsigned, unsigned long long, int as declared");
    // host code: an error under 1 was truncated to 0 and the check passed whatever the kernel did
    const float got[3] = {1.0f, 2.25f, 3.0f}, want[3] = {1.0f, 3.0f, 3.0f};
    check(largest_error(got, want, 3) == 0.75f, "Math API: host-side max(float, float) finds an error of 0.75");
}

// ---------------------------------------------------------------------------------------
// shuffles with a width. Programming Guide, "Warp Shuffle Functions": with width under warpSize
// each group of width consecutive lanes is a segment; __shfl_sync's srcLane outside [0:width-1]
// reads srcLane modulo width in the caller's segment; __shfl_up_sync/__shfl_down_sync do not
// wrap: a source before or after the segment leaves the caller's own value; __shfl_xor_sync:
// "each group of width consecutive threads are able to access elements from earlier groups of
// threads, however if they attempt to access elements from later groups of threads their own
// value of var will be returned". PTX ISA, "shfl.sync": the source lane uses b[4:0] ("an out of
// range value of b may still result in a valid computed source lane index j").

constexpr int SHFL_CASES = 9;
__global__ void shuffle_width_kernel(int* out, double* out_d) {
    const int lane = threadIdx.x % 32;
    const int v = 100 + lane;
    out[0 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 8, 8);
    out[1 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 16, 8);
    out[2 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 1, 1);
    out[3 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 3, 4);
    out[4 * 32 + lane] = __shfl_sync(0xffffffffu, v, 9, 8);
    out[5 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 3, 8);
    out[6 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 2, 16);
    out[7 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 33);
    out[8 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 34, 16);
    out_d[lane] = __shfl_xor_sync(0xffffffffu, 0.5 + lane, 24, 16);
}

static void test_shuffle_width() {
    int* d;
    double* dd;
    OK(cudaMalloc(&d, sizeof(int) * SHFL_CASES * 32));
    OK(cudaMalloc(&dd, 32 * sizeof(double)));
    shuffle_width_kernel<<<1, 32>>>(d, dd);
    std::vector<int> h((size_t)SHFL_CASES * 32);
    std::vector<double> hd(32);
    OK(cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(hd.data(), dd, hd.size() * sizeof(double), cudaMemcpyDeviceToHost));
    auto v = [](int lane) { return 100 + lane; };
    // the guide's rule for __shfl_xor_sync: the partner's value if its group is not a later one
    auto xor_src = [](int lane, int mask, int width) {
        const int j = lane ^ mask;
        return j / width <= lane / width ? j : lane;
    };
    bool ok[SHFL_CASES + 1];
    for (bool& b : ok) b = true;
    for (int l = 0; l < 32; l++) {
        const int seg = l / 8 * 8, seg16 = l / 16 * 16;
        ok[0] &= h[0 * 32 + l] == v(xor_src(l, 8, 8));
        ok[1] &= h[1 * 32 + l] == v(xor_src(l, 16, 8));
        ok[2] &= h[2 * 32 + l] == v(xor_src(l, 1, 1));
        ok[3] &= h[3 * 32 + l] == v(l ^ 3);                        // inside its group of 4
        ok[4] &= h[4 * 32 + l] == v(seg + 9 % 8);                  // srcLane 9 modulo 8, own segment
        ok[5] &= h[5 * 32 + l] == v(l + 3 < seg + 8 ? l + 3 : l);  // no wrap past the segment
        ok[6] &= h[6 * 32 + l] == v(l - 2 >= seg16 ? l - 2 : l);   // none before the segment
        ok[7] &= h[7 * 32 + l] == v(l + 1 < 32 ? l + 1 : l);       // delta 33: b[4:0] = 1
        ok[8] &= h[8 * 32 + l] == v(l - 2 >= seg16 ? l - 2 : l);   // delta 34: b[4:0] = 2
        const int jd = xor_src(l, 24, 16);
        ok[9] &= hd[l] == 0.5 + jd;
    }
    check(ok[0], "Guide, Warp Shuffle Functions: __shfl_xor_sync(v, 8, width 8): lanes 8-15 and 24-31 read the "
                 "earlier group, lanes 0-7 and 16-23 keep their own value");
    check(ok[1], "Guide: __shfl_xor_sync(v, 16, width 8): lanes 16-31 read lanes 0-15, lanes 0-15 keep their own");
    check(ok[2], "Guide: __shfl_xor_sync(v, 1, width 1): odd lanes read the lane before, even lanes their own");
    check(ok[3], "control: Guide: __shfl_xor_sync(v, 3, width 4) inside each group of 4");
    check(ok[4], "control: Guide: __shfl_sync(v, 9, width 8) reads lane 1 of the caller's own group of 8");
    check(ok[5], "control: Guide: __shfl_down_sync(v, 3, width 8) keeps its own value past the group's end");
    check(ok[6], "control: Guide: __shfl_up_sync(v, 2, width 16) keeps its own value before the group's start");
    check(ok[7], "PTX shfl.sync: __shfl_down_sync(v, 33) shifts by b[4:0] = 1");
    check(ok[8], "PTX shfl.sync: __shfl_up_sync(v, 34, width 16) shifts by b[4:0] = 2");
    check(ok[9], "Guide: __shfl_xor_sync(double, 24, width 16): lanes 16-31 read 0-15 (xor 24), lanes 0-15 their own");
    cudaFree(d);
    cudaFree(dd);
}

// ---------------------------------------------------------------------------------------
// __activemask. Programming Guide, "Warp Vote Functions": "Returns a 32-bit integer mask of all
// currently active threads in the calling warp. The Nth bit is set if the Nth lane in the warp
// is active when __activemask() is called. Inactive threads are represented by 0 bits in the
// returned mask. Threads which have exited the program are always marked as inactive." PTX ISA,
// "activemask": "exited or inactive or predicated-off thread will contribute 0". Lanes of a
// warp that take different sides of a branch are not active in each other's side.

constexpr int AM_SLOTS = 5;
__global__ void activemask_kernel(unsigned* out) {
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    unsigned* o = out + (size_t)warp * AM_SLOTS * 32;
    o[0 * 32 + lane] = __activemask();  // every lane of the warp that exists
    if (lane % 2 == 1) o[1 * 32 + lane] = __activemask();
    else o[2 * 32 + lane] = ~__activemask();  // (the two sides differ, so no compiler merges them)
    if (lane < 8) o[3 * 32 + lane] = __activemask();
    __syncthreads();  // lanes 8-31 wait here meanwhile
    if (lane >= 20) return;
    o[4 * 32 + lane] = __activemask();  // lanes 20-31 have exited
}

static void test_activemask() {
    // two warps: one whole, one of 16 lanes (threads 32-47)
    const int threads = 48;
    unsigned* d;
    OK(cudaMalloc(&d, sizeof(unsigned) * 2 * AM_SLOTS * 32));
    OK(cudaMemset(d, 0, sizeof(unsigned) * 2 * AM_SLOTS * 32));
    activemask_kernel<<<1, threads>>>(d);
    std::vector<unsigned> h((size_t)2 * AM_SLOTS * 32);
    OK(cudaMemcpy(h.data(), d, h.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    bool all = true, branch = true, inner = true, exited = true;
    for (int t = 0; t < threads; t++) {
        const int lane = t % 32, warp = t / 32;
        const unsigned* o = h.data() + (size_t)warp * AM_SLOTS * 32;
        const unsigned exists = warp == 0 ? 0xffffffffu : 0x0000ffffu;  // lanes the warp has
        all &= o[0 * 32 + lane] == exists;
        if (lane % 2 == 1) branch &= o[1 * 32 + lane] == (exists & 0xaaaaaaaau);
        else branch &= ~o[2 * 32 + lane] == (exists & 0x55555555u);
        if (lane < 8) inner &= o[3 * 32 + lane] == 0x000000ffu;
        if (lane < 20) exited &= o[4 * 32 + lane] == (exists & 0x000fffffu);
    }
    check(all, "Guide, Warp Vote Functions: __activemask in converged code names the warp's lanes (32, then 16)");
    check(branch, "Guide: __activemask on each side of an odd/even branch names that side's lanes only");
    check(inner, "Guide: __activemask under if (lane < 8), the rest waiting at __syncthreads: 0x000000ff");
    check(exited, "Guide: lanes 20-31 returned: __activemask marks them inactive (0x000fffff, 0x0000ffff)");
    cudaFree(d);
}

// ---------------------------------------------------------------------------------------
// stream capture across streams. Programming Guide, "CUDA Graphs" > "Creating a Graph Using
// Stream Capture" > "Cross-stream Dependencies and Events": an event recorded in a capturing
// stream is a captured event, a set of nodes; a stream that waits on it is put in capture mode
// into the same graph, its next node depending on those nodes; the streams so captured "must
// also be joined back to the origin stream", cudaStreamEndCapture must be called on the origin
// stream, it takes every stream of the capture out of capture mode, and "Failure to rejoin to
// the origin stream will result in failure of the overall capture operation". The error is
// cudaErrorStreamCaptureUnjoined, "The capture sequence contains a fork that was not joined to
// the primary stream" (Runtime API, cudaError; cudaStreamUpdateCaptureDependencies: nodes
// "unreachable from the stream at cudaStreamEndCapture" give it); a failed capture returns a
// NULL graph (cudaStreamEndCapture). "Prohibited and Unhandled Operations": merging two capture
// graphs through a captured event is invalid (cudaErrorStreamCaptureMerge); ending the capture
// on another stream is cudaErrorStreamCaptureUnmatched, "The capture was not initiated in this
// stream"; "Invalidation": an invalid operation invalidates the capture, which then ends with
// cudaErrorStreamCaptureInvalidated.

__global__ void set_kernel(float* x, float v) { x[threadIdx.x] = v; }
__global__ void add_from_kernel(float* y, const float* x, float v) { y[threadIdx.x] = x[threadIdx.x] + v; }

static bool all_equal(const float* d, float v) {
    float h[32];
    if (cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    for (float x : h)
        if (x != v) return false;
    return true;
}

static cudaStreamCaptureStatus capture_status(cudaStream_t s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(s, &st);
    return st;
}

static void test_capture_fork() {
    float *x, *y, *z;
    cudaStream_t s1, s2, s3;
    cudaEvent_t fork, join, other;
    OK(cudaMalloc(&x, 32 * sizeof(float)));
    OK(cudaMalloc(&y, 32 * sizeof(float)));
    OK(cudaMalloc(&z, 32 * sizeof(float)));
    OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
    OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    OK(cudaEventCreateWithFlags(&other, cudaEventDisableTiming));
    auto reset = [&] {
        for (float* p : {x, y, z}) cudaMemset(p, 0, 32 * sizeof(float));
        cudaDeviceSynchronize();
    };

    // forked to s2 and never joined: the capture fails, and s2 leaves capture mode with s1
    reset();
    cudaGraph_t g = (cudaGraph_t)&g;
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    set_kernel<<<1, 32, 0, s1>>>(x, 1.0f);
    OK(cudaEventRecord(fork, s1));
    OK(cudaStreamWaitEvent(s2, fork, 0));
    check(capture_status(s2) == cudaStreamCaptureStatusActive,
          "Guide, Cross-stream Dependencies: waiting on a captured event puts s2 in capture mode");
    add_from_kernel<<<1, 32, 0, s2>>>(y, x, 2.0f);
    const cudaError_t unjoined = cudaStreamEndCapture(s1, &g);
    check(unjoined == cudaErrorStreamCaptureUnjoined && g == nullptr,
          "Guide/Runtime API: cudaStreamEndCapture with s2's work not joined back fails with "
          "cudaErrorStreamCaptureUnjoined and a NULL graph");
    cudaGetLastError();
    check(capture_status(s1) == cudaStreamCaptureStatusNone && capture_status(s2) == cudaStreamCaptureStatusNone,
          "control: Guide: cudaStreamEndCapture takes both streams out of capture mode");
    OK(cudaDeviceSynchronize());
    check(all_equal(x, 0.0f) && all_equal(y, 0.0f), "Guide: the forked stream's work was captured, not run");
    set_kernel<<<1, 32, 0, s2>>>(y, 5.0f);  // s2 runs work again
    OK(cudaStreamSynchronize(s2));
    check(all_equal(y, 5.0f), "control: after the failed capture s2 runs its work");

    // forked and joined: one graph, the fork's node between the origin's
    reset();
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    set_kernel<<<1, 32, 0, s1>>>(x, 1.0f);            // A
    OK(cudaEventRecord(fork, s1));
    OK(cudaStreamWaitEvent(s2, fork, 0));
    add_from_kernel<<<1, 32, 0, s2>>>(y, x, 2.0f);    // B, after A
    OK(cudaEventRecord(join, s2));
    OK(cudaStreamWaitEvent(s1, join, 0));
    add_from_kernel<<<1, 32, 0, s1>>>(z, y, 10.0f);   // C, after B
    g = nullptr;
    OK(cudaStreamEndCapture(s1, &g));
    check(g != nullptr && capture_status(s2) == cudaStreamCaptureStatusNone,
          "control: Guide: a fork joined back into the origin stream ends in a graph, s2 out of capture mode");
    size_t n = 0, ne = 0;
    if (g != nullptr) OK(cudaGraphGetNodes(g, nullptr, &n));
    check(n == 3, "Guide: the three launches of both streams are the graph's three nodes (events make edges)");
    cudaGraphNode_t nodes[3] = {}, from[8] = {}, to[8] = {};
    if (n == 3) {
        OK(cudaGraphGetNodes(g, nodes, &n));
        ne = 8;
        OK(cudaGraphGetEdges(g, from, to, nullptr, &ne));
    }
    // the nodes come in capture order here (A, B, C): which is which is checked through the replay
    auto has_edge = [&](cudaGraphNode_t a, cudaGraphNode_t b) {
        for (size_t i = 0; i < ne; i++)
            if (from[i] == a && to[i] == b) return true;
        return false;
    };
    check(n == 3 && has_edge(nodes[0], nodes[1]) && has_edge(nodes[1], nodes[2]) && !has_edge(nodes[1], nodes[0]),
          "Guide: the graph's edges: the fork's node depends on the origin's first, the origin's last on it");
    OK(cudaDeviceSynchronize());
    check(all_equal(x, 0.0f) && all_equal(y, 0.0f) && all_equal(z, 0.0f), "Guide: both streams' work captured, not run");
    if (g != nullptr) {
        cudaGraphExec_t ge;
        OK(cudaGraphInstantiate(&ge, g, 0));
        OK(cudaGraphLaunch(ge, s3));
        OK(cudaStreamSynchronize(s3));
        check(all_equal(x, 1.0f) && all_equal(y, 3.0f) && all_equal(z, 13.0f),
              "the joined graph replayed on a third stream: x = 1, y = x + 2, z = y + 10");
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
    }

    // a fork that queued nothing is joined: its only dependency is the origin's node
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    set_kernel<<<1, 32, 0, s1>>>(x, 1.0f);
    OK(cudaEventRecord(fork, s1));
    OK(cudaStreamWaitEvent(s2, fork, 0));
    set_kernel<<<1, 32, 0, s1>>>(x, 2.0f);
    g = nullptr;
    OK(cudaStreamEndCapture(s1, &g));
    check(g != nullptr, "control: Runtime API: a fork with no node of its own ends in a graph (nothing unreachable)");
    if (g != nullptr) cudaGraphDestroy(g);

    // ended on the forked stream: not where it began; the capture is then invalid
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    set_kernel<<<1, 32, 0, s1>>>(x, 1.0f);
    OK(cudaEventRecord(fork, s1));
    OK(cudaStreamWaitEvent(s2, fork, 0));
    g = (cudaGraph_t)&g;
    check(cudaStreamEndCapture(s2, &g) == cudaErrorStreamCaptureUnmatched,
          "Guide: cudaStreamEndCapture on the forked stream: cudaErrorStreamCaptureUnmatched");
    g = (cudaGraph_t)&g;
    check(cudaStreamEndCapture(s1, &g) == cudaErrorStreamCaptureInvalidated && g == nullptr,
          "Guide, Invalidation: ...which invalidated the capture: the origin ends it with no graph");
    cudaGetLastError();

    // a captured event of one capture waited on by a stream in another: an invalid merge
    OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    OK(cudaStreamBeginCapture(s3, cudaStreamCaptureModeRelaxed));
    set_kernel<<<1, 32, 0, s1>>>(x, 1.0f);
    set_kernel<<<1, 32, 0, s3>>>(y, 1.0f);
    OK(cudaEventRecord(other, s1));
    check(cudaStreamWaitEvent(s3, other, 0) == cudaErrorStreamCaptureMerge,
          "Guide, Prohibited Operations: waiting on another capture's event: cudaErrorStreamCaptureMerge");
    cudaGraph_t g1 = (cudaGraph_t)&g1, g3 = (cudaGraph_t)&g3;
    const cudaError_t e1 = cudaStreamEndCapture(s1, &g1), e3 = cudaStreamEndCapture(s3, &g3);
    check(e1 == cudaErrorStreamCaptureInvalidated && e3 == cudaErrorStreamCaptureInvalidated && g1 == nullptr &&
              g3 == nullptr,
          "Guide, Invalidation: both captures of the attempted merge end invalidated");
    cudaGetLastError();

    OK(cudaDeviceSynchronize());
    for (cudaEvent_t e : {fork, join, other}) cudaEventDestroy(e);
    for (cudaStream_t s : {s1, s2, s3}) cudaStreamDestroy(s);
    for (float* p : {x, y, z}) cudaFree(p);
}

// ---------------------------------------------------------------------------------------
// atomicAdd(float2*). CUDA Programming Guide, "atomicAdd()": "float2 atomicAdd(float2* address,
// float2 val)" on global memory, compute capability 9.x and higher; "The atomicity of the float2
// or float4 add operation is guaranteed separately for each of the two or four float elements";
// like every atomicAdd it returns the old value. N threads adding (1, 2) to one pair: the pair
// ends (N, 2N), and the old values the threads got back are each element's N partial sums, once
// each (0, 1, ..., N-1 and 0, 2, ..., 2N-2: sums N(N-1)/2 and N(N-1)).

__global__ void vector_atomic_kernel(float2* pairs, float* old_sums) {
    const float2 old = atomicAdd(pairs + threadIdx.x % 2, make_float2(1.0f, 2.0f));
    const size_t pair = threadIdx.x % 2;
    atomicAdd(old_sums + 2 * pair, old.x);
    atomicAdd(old_sums + 2 * pair + 1, old.y);
}

static void test_vector_atomic() {
    const int blocks = 3, threads = 256, n = blocks * threads / 2;  // n adds to each of the two pairs
    float2* pairs;
    float* old_sums;
    OK(cudaMalloc(&pairs, 2 * sizeof(float2)));
    OK(cudaMalloc(&old_sums, 4 * sizeof(float)));
    OK(cudaMemset(pairs, 0, 2 * sizeof(float2)));
    OK(cudaMemset(old_sums, 0, 4 * sizeof(float)));
    vector_atomic_kernel<<<blocks, threads>>>(pairs, old_sums);
    OK(cudaGetLastError());
    float got[4], olds[4];
    OK(cudaMemcpy(got, pairs, sizeof(got), cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(olds, old_sums, sizeof(olds), cudaMemcpyDeviceToHost));
    const float tri = (float)n * (n - 1) / 2.0f;  // 0 + 1 + ... + n-1, exact in float here
    check(got[0] == n && got[1] == 2.0f * n && got[2] == n && got[3] == 2.0f * n,
          "atomicAdd(float2*): 384 adds of (1, 2) to each of two pairs give (384, 768)");
    check(olds[0] == tri && olds[1] == 2.0f * tri && olds[2] == tri && olds[3] == 2.0f * tri,
          "atomicAdd(float2*): the old values returned are each element's partial sums, each once");
    cudaFree(pairs);
    cudaFree(old_sums);
}

int main() {
    test_min_max();
    test_vector_atomic();
    test_shuffle_width();
    test_activemask();
    test_capture_fork();
    printf("%d failed\n", failures);
    return failures > 100 ? 100 : failures;
}
