// test_emu_runtime.cu: the emulated GPU's execution model and runtime (llmc/emu), checked
// against what CUDA's programming guide and runtime API document. Built for the emulator
// only (scripts/cu2cpp.py, emu.mk); test/test_emu.sh also runs the cases that must stop the
// program (a deadlock, a race, a lane that exited) one by one through `--fail NAME`.
//
// Each check prints PASS/FAIL; the exit code is the number of failures (capped).
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

static int failures = 0;
static void check(bool ok, const char* what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (!ok) failures++;
}
#define OK(x) check((x) == cudaSuccess, #x)

// every thread writes its coordinates: the grid and block shapes reach the kernel
__global__ void coords_kernel(int* out) {
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int n = blockDim.x * blockDim.y * blockDim.z;
    out[b * n + t] = b * 10000 + t;
}

// a block-wide sum through shared memory with barriers: right in any thread order
__global__ void block_sum_kernel(float* out, const float* in) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

// the same without the barriers: a data race, which the race check must report
__global__ void racy_sum_kernel(float* out, const float* in) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * 256 + t];
    for (int s = 128; s > 0; s >>= 1)
        if (t < s) buf[t] += buf[t + s];
    if (t == 0) out[blockIdx.x] = buf[0];
}

// shuffles and votes against their definitions in the programming guide
__global__ void warp_ops_kernel(int* out) {
    int lane = threadIdx.x % 32;
    int v = lane * 3 + 1;
    out[0 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 5);
    out[1 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 3);
    out[2 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 2);
    out[3 * 32 + lane] = __shfl_sync(0xffffffffu, v, 7);
    out[4 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 1, 8);  // width 8 segments
    out[5 * 32 + lane] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[6 * 32 + lane] = __all_sync(0xffffffffu, lane < 40) + 2 * __any_sync(0xffffffffu, lane == 31);
}

__global__ void dyn_smem_kernel(float* out, int n) {
    extern __shared__ float dyn[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) dyn[i] = (float)(i % 3);
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += dyn[i];
    if (threadIdx.x == 0) out[0] = s;
}

// half a warp waits at __syncthreads, the other half at a shuffle that needs the first half
__global__ void deadlock_kernel(float* out) {
    if (threadIdx.x < 16) __syncthreads();
    else out[0] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// lanes that return before a full-mask shuffle
__global__ void exited_lane_kernel(float* out) {
    if (threadIdx.x % 32 >= 16) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void add_kernel(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}

static int run_failure_case(const char* name) {
    float* d;
    cudaMalloc(&d, 1024 * sizeof(float));
    if (strcmp(name, "deadlock") == 0) {
        deadlock_kernel<<<1, 32>>>(d);
    } else if (strcmp(name, "exited_lane") == 0) {
        exited_lane_kernel<<<1, 32>>>(d);
    } else if (strcmp(name, "race") == 0) {  // run with EMU_RACECHECK=1
        float* in;
        cudaMalloc(&in, 256 * sizeof(float));
        std::vector<float> h(256);
        for (int i = 0; i < 256; i++) h[i] = (float)(i % 7);
        cudaMemcpy(in, h.data(), 256 * sizeof(float), cudaMemcpyHostToDevice);
        racy_sum_kernel<<<1, 256>>>(d, in);
    } else {
        fprintf(stderr, "unknown failure case %s\n", name);
        return 2;
    }
    cudaDeviceSynchronize();
    printf("the %s case ran to the end\n", name);
    return 0;  // test_emu.sh requires a non-zero exit and the emulator's message
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "--fail") == 0) return run_failure_case(argv[2]);

    // grid and block coordinates, 3-D
    {
        dim3 grid(3, 2, 2), block(4, 3, 2);
        const int n = 12 * 24;
        int* d;
        OK(cudaMalloc(&d, n * sizeof(int)));
        coords_kernel<<<grid, block>>>(d);
        OK(cudaGetLastError());
        std::vector<int> h(n);
        OK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int b = 0; b < 12; b++)
            for (int t = 0; t < 24; t++) ok &= h[b * 24 + t] == b * 10000 + t;
        check(ok, "every (block, thread) of a 3-D grid runs once with its coordinates");
        cudaFree(d);
    }
    // barriers: the tree sum is exact on integers whatever the order
    {
        const int blocks = 5;
        std::vector<float> h((size_t)blocks * 256);
        for (size_t i = 0; i < h.size(); i++) h[i] = (float)(i % 13);
        float *in, *out;
        OK(cudaMalloc(&in, h.size() * sizeof(float)));
        OK(cudaMalloc(&out, blocks * sizeof(float)));
        OK(cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
        block_sum_kernel<<<blocks, 256>>>(out, in);
        std::vector<float> r(blocks);
        OK(cudaMemcpy(r.data(), out, blocks * sizeof(float), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int b = 0; b < blocks; b++) {
            float want = 0;
            for (int t = 0; t < 256; t++) want += h[b * 256 + t];
            ok &= r[b] == want;
        }
        check(ok, "__syncthreads: a shared-memory tree sum per block");
        cudaFree(in);
        cudaFree(out);
    }
    // warp operations
    {
        int* d;
        OK(cudaMalloc(&d, sizeof(int) * 7 * 32));
        warp_ops_kernel<<<1, 32>>>(d);
        std::vector<int> h((size_t)7 * 32);
        OK(cudaMemcpy(h.data(), d, h.size() * sizeof(int), cudaMemcpyDeviceToHost));
        bool x = true, dn = true, up = true, bc = true, w8 = true, bal = true, vote = true;
        unsigned ballot = 0;
        for (int l = 0; l < 32; l += 3) ballot |= 1u << l;
        for (int l = 0; l < 32; l++) {
            auto v = [](int lane) { return lane * 3 + 1; };
            x &= h[l] == v(l ^ 5);
            dn &= h[32 + l] == v(l + 3 < 32 ? l + 3 : l);
            up &= h[64 + l] == v(l >= 2 ? l - 2 : l);
            bc &= h[96 + l] == v(7);
            w8 &= h[128 + l] == v(l ^ 1);
            bal &= (unsigned)h[160 + l] == ballot;
            vote &= h[192 + l] == 3;
        }
        check(x, "__shfl_xor_sync");
        check(dn, "__shfl_down_sync keeps its own value past the end");
        check(up, "__shfl_up_sync keeps its own value before the start");
        check(bc, "__shfl_sync broadcast");
        check(w8, "__shfl_xor_sync with width 8");
        check(bal, "__ballot_sync");
        check(vote, "__all_sync and __any_sync");
        cudaFree(d);
    }
    // dynamic shared memory and its limits
    {
        float* d;
        OK(cudaMalloc(&d, sizeof(float)));
        const int n = 16 * 1024;  // 64 KB
        dyn_smem_kernel<<<1, 128, n * sizeof(float)>>>(d, n);
        check(cudaGetLastError() == cudaErrorInvalidValue, "64 KB of dynamic shared memory without the attribute fails");
        check(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) ==
                  cudaErrorInvalidValue,
              "the attribute above the H100's 227 KB fails");
        cudaGetLastError();  // the error stays until read, as in the real runtime
        OK(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n * sizeof(float)));
        dyn_smem_kernel<<<1, 128, n * sizeof(float)>>>(d, n);
        OK(cudaGetLastError());
        float h = 0;
        OK(cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost));
        check(h == (float)(n / 3 * 3), "64 KB of dynamic shared memory after cudaFuncSetAttribute");
        cudaFree(d);
    }
    // launch limits of an H100
    {
        float* d;
        OK(cudaMalloc(&d, sizeof(float)));
        add_kernel<<<1, 1025>>>(d, 1.0f, 1);
        check(cudaGetLastError() == cudaErrorInvalidConfiguration, "1,025 threads a block fail");
        add_kernel<<<dim3(1, 65536), 32>>>(d, 1.0f, 1);
        check(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid y of 65,536 fails");
        add_kernel<<<dim3(1, 1, 1), dim3(1, 1, 65)>>>(d, 1.0f, 1);
        check(cudaGetLastError() == cudaErrorInvalidConfiguration, "block z of 65 fails");
        add_kernel<<<0, 32>>>(d, 1.0f, 1);
        check(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid fails");
        check(cudaGetLastError() == cudaSuccess, "cudaGetLastError resets the error");
        cudaDeviceProp p;
        OK(cudaGetDeviceProperties(&p, 0));
        check(p.major == 9 && p.multiProcessorCount == 132 && p.sharedMemPerBlockOptin == (size_t)227 * 1024,
              "cudaGetDeviceProperties: an H100 SXM");
        check(cudaMemcpy(d, d, 8, cudaMemcpyDeviceToDevice) == cudaErrorInvalidValue,
              "a copy past the end of an allocation fails");
        cudaFree(d);
    }
    // streams, events, pinned and pageable copies
    {
        const int n = 1 << 16;
        float *d, *pinned;
        cudaStream_t s1, s2;
        cudaEvent_t e;
        OK(cudaMalloc(&d, n * sizeof(float)));
        OK(cudaMallocHost(&pinned, n * sizeof(float)));
        OK(cudaStreamCreate(&s1));
        OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
        OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        OK(cudaMemsetAsync(d, 0, n * sizeof(float), s1));
        for (int i = 0; i < 20; i++) add_kernel<<<n / 256, 256, 0, s1>>>(d, 1.0f, n);
        OK(cudaEventRecord(e, s1));
        OK(cudaStreamWaitEvent(s2, e, 0));
        add_kernel<<<n / 256, 256, 0, s2>>>(d, 100.0f, n);  // after the 20 on s1
        OK(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
        OK(cudaStreamSynchronize(s2));
        bool ok = true;
        for (int i = 0; i < n; i++) ok &= pinned[i] == 120.0f;
        check(ok, "cudaStreamWaitEvent orders a non-blocking stream after another");
        // a pageable source is taken at the call: changing it afterwards changes nothing
        std::vector<float> page(n, 5.0f);
        OK(cudaMemcpyAsync(d, page.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1));
        std::fill(page.begin(), page.end(), 6.0f);
        OK(cudaMemcpyAsync(page.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s1));
        check(page[0] == 5.0f && page[n - 1] == 5.0f, "pageable copies: staged at the call, back before the return");
        OK(cudaStreamQuery(s1));
        cudaEventDestroy(e);
        cudaStreamDestroy(s1);
        cudaStreamDestroy(s2);
        cudaFreeHost(pinned);
        cudaFree(d);
    }
    // graphs: capture records without running; replay runs with the captured arguments
    {
        float* d;
        cudaStream_t s;
        OK(cudaStreamCreate(&s));
        OK(cudaMalloc(&d, 64 * sizeof(float)));
        OK(cudaMemsetAsync(d, 0, 64 * sizeof(float), s));
        OK(cudaStreamSynchronize(s));
        cudaGraph_t g;
        cudaGraphExec_t x;
        OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        float v = 2.0f;
        add_kernel<<<1, 64, 0, s>>>(d, v, 64);
        v = 100.0f;  // not seen: the arguments were taken at the launch
        add_kernel<<<1, 64, 0, s>>>(d, 1.0f, 64);
        check(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported,
              "cudaStreamSynchronize on a capturing stream fails");
        check(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated,
              "the synchronisation invalidated the capture");
        OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        add_kernel<<<1, 64, 0, s>>>(d, 2.0f, 64);
        add_kernel<<<1, 64, 0, s>>>(d, 1.0f, 64);
        check(cudaMemset(d, 0, 4) == cudaErrorStreamCaptureImplicit,
              "the legacy stream during a capture of a blocking stream fails");
        check(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && g == nullptr,
              "...and invalidated that capture");
        cudaGetLastError();
        OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        add_kernel<<<1, 64, 0, s>>>(d, 2.0f, 64);
        add_kernel<<<1, 64, 0, s>>>(d, 1.0f, 64);
        OK(cudaStreamEndCapture(s, &g));
        size_t nodes = 0;
        OK(cudaGraphGetNodes(g, nullptr, &nodes));
        check(nodes == 2, "two launches captured as two nodes");
        float h = -1;
        OK(cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost));
        check(h == 0.0f, "capture records and does not run");
        OK(cudaGraphInstantiate(&x, g, 0));
        for (int i = 0; i < 3; i++) OK(cudaGraphLaunch(x, s));
        OK(cudaStreamSynchronize(s));
        OK(cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost));
        check(h == 9.0f, "three replays of the captured work");
        cudaGraphExecDestroy(x);
        cudaGraphDestroy(g);
        cudaStreamDestroy(s);
        cudaFree(d);
    }
    {
        // emu::device_range, what cp.async and ldmatrix ask of each lane's address (and answer
        // from a memo while no allocation comes or goes): inside one allocation only, and an
        // allocation freed or made shows at once, on every host thread
        char *a = nullptr, *b = nullptr, *c = nullptr;
        OK(cudaMalloc(&a, 1000));
        OK(cudaMalloc(&b, 1000));
        check(emu::device_range(a, 1000) && emu::device_range(a + 999, 1) && emu::device_range(b + 16, 16),
              "device_range: inside an allocation");
        check(!emu::device_range(a, 1001) && !emu::device_range(a + 1000, 1) && !emu::device_range(a - 1, 2),
              "device_range: across an allocation's end or start, or past it: not inside");
        check(emu::device_range(a + 8, 8), "device_range: inside again");
        OK(cudaFree(a));
        check(!emu::device_range(a + 8, 8) && emu::device_range(b, 1000), "device_range: a freed allocation is gone");
        OK(cudaMalloc(&c, 64));
        check(emu::device_range(c, 64) && !emu::device_range(c, 65), "device_range: a new allocation is known at once");
        bool other = false;
        std::thread t([&] { other = emu::device_range(c, 64) && emu::device_range(b, 1); });
        t.join();
        check(other, "device_range: on another host thread");
        check(emu::device_range(b, 1), "device_range: b still inside");
        std::thread u([&] { other = cudaFree(b) == cudaSuccess; });
        u.join();
        check(other && !emu::device_range(b, 1) && emu::device_range(c, 1),
              "device_range: a free on another host thread shows here");
        OK(cudaFree(c));
    }
    printf("%d failed\n", failures);
    return failures > 100 ? 100 : failures;
}
