// comm.h: the processes of one training run: rank, world size, local rank (which GPU), and
// the collectives the trainers use. One collective engine per device:
//   CPU  MPI: processes started by mpirun, or srun with PMIx (-pi mpi, the default); built in
//        when make finds mpicxx (USE_MPI)
//   GPU  NCCL (llmc/cuda/comm_gpu.cuh): once it is up it takes over every collective here
//        (comm_set_engine), the host's small sums and broadcasts included; it is started
//        from MPI, or without MPI from llmc/comm_socket.h's bootstrap (-pi fs | tcp: any
//        launcher, -pn and -pr; the processes meet through a file in a shared directory
//        (-pf) or at rank 0's address (-ps), and exchange NCCL's id)
// Before an engine is up only comm_exchange (MPI or the bootstrap's sockets) runs: the small
// records the processes need to agree on one (which GPU each drives, NCCL's id). Ranks that
// share one GPU cannot have NCCL (it refuses two ranks on a device): their GPU trainer stages
// its buffers through the host and MPI's collectives, so it needs mpirun.
// defines: Comm, CommEngine, comm_init, comm_free, comm_set_engine, comm_exchange,
//          comm_reduce_scatter_v_f32, comm_all_gather_v, comm_all_gather, comm_broadcast,
//          comm_sum_f64, comm_sum, comm_barrier, comm_split, comm_all_reduce_f32, comm_gather_v_f32,
//          CommSends, comm_isend_f32, comm_sends_wait, comm_recv_f32, comm_all_gather_f32, comm_reduce_scatter_f32
//
// Every result is bitwise identical on every rank: reductions are a reduce-scatter (each
// slice summed once, by its owner) followed by an all-gather, and scalar sums are added in
// rank order (on rank 0 and broadcast, or on every rank from the same gathered values). So the
// ranks' weights never drift apart, and a step guard (llmc/faults.h) judging the same loss
// and norm reaches the same verdict everywhere.
//
// No wait is unbounded: a collective that has not completed within -pt seconds stops this
// process with an error naming it (another rank hung or died). The sockets and NCCL poll
// with that timeout; MPI calls cannot time out, so a watchdog thread ends the process, and
// mpirun (or srun --kill-on-bad-exit) then stops the rest.
#pragma once
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>
#ifdef USE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: MPI's C++ bindings are deprecated and warn
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "utils.h"        // defines: fail, CHECK
#include "args.h"         // defines: TrainConfig
#include "comm_socket.h"  // defines: SocketComm, socket_comm_create, socket_exchange

// How the processes started: mpirun (MPI), or the sockets' bootstrap (-pi fs | tcp).
enum CommTransport { COMM_TRANSPORT_NONE, COMM_TRANSPORT_MPI, COMM_TRANSPORT_SOCKET };

// The device's collective engine (the GPU trainer's NCCL), in place on host buffers: each
// call returns once the collective completed on every rank, or stops the process.
struct CommEngine {
    const char* name = nullptr;  // nullptr: none set
    void* self = nullptr;
    // buf holds world records of `bytes`; this rank's is its input; afterwards every rank's
    void (*all_gather)(void* self, void* buf, size_t bytes) = nullptr;
    void (*broadcast)(void* self, void* buf, size_t bytes, int root) = nullptr;
};

struct Comm {
    int rank = 0, world = 1;
    int local_rank = 0;                          // index of this process on its node: its GPU
    CommTransport transport = COMM_TRANSPORT_NONE;
    SocketComm* sock = nullptr;                  // the bootstrap (-pi fs | tcp)
    CommEngine engine;                           // set by the device once it is up
    double timeout_s = 600.0;                    // -pt
    bool threads_ok = true;                      // collectives may run on another thread than main's
    // the MPI watchdog: when the collective in progress started (0: none), and its name
    std::atomic<double> busy_since{0.0};
    std::atomic<const char*> busy_what{""};
    std::atomic<bool> watchdog_stop{false};
    std::thread watchdog;
#ifdef USE_MPI
    MPI_Comm mpi = MPI_COMM_WORLD;               // the processes of this group (comm_split: a part of the world)
#endif
    Comm* parent = nullptr;                      // comm_split: the world's Comm, whose watchdog watches this one
};

inline double comm_clock_() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline const char* comm_env_(const char* const* names) {
    for (; *names != nullptr; names++) {
        const char* v = getenv(*names);
        if (v != nullptr && *v != '\0') return v;
    }
    return nullptr;
}

// True when a process manager (mpirun, srun with PMI/PMIx) started this process.
inline bool comm_under_mpi_launcher_() {
    static const char* const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
                                        "MPI_LOCALNRANKS", nullptr};
    return comm_env_(names) != nullptr;
}

// Marks a collective as in progress for the watchdog (MPI only), for the scope.
struct CommBusy {
    Comm* c;
    CommBusy(Comm* comm, const char* what) : c(comm->parent != nullptr ? comm->parent : comm) {
        c->busy_what = what;
        c->busy_since = comm_clock_();
    }
    ~CommBusy() { c->busy_since = 0.0; }
};

inline void comm_watchdog_run_(Comm* c) {
    while (!c->watchdog_stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        double since = c->busy_since;
        if (since > 0.0 && comm_clock_() - since > c->timeout_s) {
            // not fail(): this thread must not run exit handlers while MPI is in a call
            fprintf(stderr, "error: rank %d: %s did not complete within -pt %.0f s: another rank hung or died; stopping\n",
                    c->rank, (const char*)c->busy_what, c->timeout_s);
            fflush(stderr);
            _exit(1);
        }
    }
}

// Starts the processes' communication from the flags (-pi, -pn, -pr, -pg, -pf, -ps, -pt).
// A single process (no launcher, -pn 1) needs nothing and gets COMM_TRANSPORT_NONE.
// Other ranks' stdout goes to /dev/null: rank 0 prints the run; errors still reach stderr.
inline void comm_init(Comm* c, const TrainConfig& cfg, int* argc, char*** argv) {
    c->timeout_s = cfg.comm_timeout;
    const std::string& method = cfg.init_method;
    if (method != "mpi" && method != "fs" && method != "tcp")
        fail("flag -pi: unknown init method '%s' (mpi | fs | tcp)", method.c_str());
    if (method == "mpi") {
        if (!comm_under_mpi_launcher_()) {
            if (cfg.num_processes != 1)
                fail("-pn %d with -pi mpi: start the processes with mpirun -np %d (or srun), or (GPU trainers) use -pi fs / -pi tcp",
                     cfg.num_processes, cfg.num_processes);
            return;  // one process, nothing to set up
        }
#ifdef USE_MPI
        // serialized: the gradient reductions run on a worker thread while the backward goes
        // on (llmc/grad_sync.h), never two threads in MPI at once
        int provided = 0;
        MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        c->threads_ok = provided >= MPI_THREAD_SERIALIZED;
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->world);
        c->transport = COMM_TRANSPORT_MPI;
        if (cfg.num_processes != 1 && cfg.num_processes != c->world)
            fail("-pn %d but mpirun started %d processes", cfg.num_processes, c->world);
        c->watchdog = std::thread(comm_watchdog_run_, c);
#else
        fail("this binary was built without MPI (make found no mpicxx): start one process without mpirun, "
             "or (GPU trainers) use -pi fs -pf DIR / -pi tcp -ps HOST with -pn and -pr");
#endif
    } else {
        if (cfg.process_rank >= cfg.num_processes)
            fail("-pr %d: the rank must be below -pn %d", cfg.process_rank, cfg.num_processes);
        if (method == "fs" && cfg.fs_path.empty()) fail("-pi fs needs -pf DIR, a directory every process can reach");
        if (method == "tcp" && cfg.server_ip.empty()) fail("-pi tcp needs -ps HOST[:PORT], rank 0's address");
        c->rank = cfg.process_rank;
        c->world = cfg.num_processes;
        if (c->world > 1) {
            c->sock = socket_comm_create(c->rank, c->world, method.c_str(), cfg.fs_path.c_str(),
                                         cfg.server_ip.c_str(), c->timeout_s);
            c->transport = COMM_TRANSPORT_SOCKET;
        }
    }
    static const char* const local_names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK",
                                              "MPI_LOCALRANKID", nullptr};
    const char* local = comm_env_(local_names);
    c->local_rank = local != nullptr ? atoi(local) : c->rank % cfg.gpus_per_node;
    if (c->rank != 0 && freopen("/dev/null", "w", stdout) == nullptr)
        fail("rank %d: cannot silence stdout (%s)", c->rank, strerror(errno));
}

inline void comm_free(Comm* c) {
    if (c->parent != nullptr) {  // a group of comm_split's: its communicator only
#ifdef USE_MPI
        if (c->transport == COMM_TRANSPORT_MPI) MPI_Comm_free(&c->mpi);
#endif
        c->transport = COMM_TRANSPORT_NONE;
        return;
    }
    if (c->watchdog.joinable()) {
        c->watchdog_stop = true;
        c->watchdog.join();
    }
#ifdef USE_MPI
    if (c->transport == COMM_TRANSPORT_MPI) MPI_Finalize();
#endif
    if (c->sock != nullptr) socket_comm_destroy(c->sock);
    c->sock = nullptr;
    c->transport = COMM_TRANSPORT_NONE;
    c->engine = CommEngine();
}

// From now on the collectives below run on `e` (the GPU's NCCL); a default CommEngine goes
// back to MPI.
inline void comm_set_engine(Comm* c, const CommEngine& e) { c->engine = e; }

inline bool comm_has_engine_(const Comm* c) { return c->engine.name != nullptr; }

// A collective with neither an engine nor MPI: the bootstrap's sockets carry no collectives.
[[noreturn]] inline void comm_no_engine_(const Comm* c, const char* what) {
    fail("rank %d: %s across %d processes needs MPI (start them with mpirun) or the GPU's NCCL; "
         "-pi fs|tcp only bootstraps NCCL", c->rank, what, c->world);
}

// The bootstrap's collective, on every transport: each rank's record of `bytes` (the same on
// every rank; small) to every rank: all[r * bytes, (r + 1) * bytes) is rank r's afterwards.
inline void comm_exchange(Comm* c, const void* mine, size_t bytes, void* all) {
    if (c->world == 1) {
        if (bytes > 0) memmove(all, mine, bytes);
        return;
    }
    if (c->transport == COMM_TRANSPORT_SOCKET) return socket_exchange(c->sock, mine, bytes, all);
#ifdef USE_MPI
    CHECK(bytes <= (size_t)INT32_MAX / (size_t)c->world, "bytes=%zu: MPI counts are int", bytes);
    CommBusy busy(c, "exchange");
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->mpi);
#endif
}

// In place: buf holds the parts of counts[0..world) floats back to back (part r is rank r's;
// parts may differ in size or be empty); afterwards this rank's part holds the sum over ranks
// of that part (the other parts are left as scratch). MPI only: the CPU trainer's, and the
// GPU trainer's when its ranks share a GPU (NCCL's reductions run on device buffers).
inline void comm_reduce_scatter_v_f32(Comm* c, float* buf, const size_t* counts) {
    if (c->world == 1) return;
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a reduce-scatter");
#ifdef USE_MPI
    std::vector<int> n(c->world);
    size_t own = 0;
    for (int r = 0; r < c->world; r++) {
        CHECK(counts[r] <= (size_t)INT32_MAX, "counts[%d]=%zu: MPI counts are int", r, counts[r]);
        n[r] = (int)counts[r];
        if (r < c->rank) own += counts[r];
    }
    CommBusy busy(c, "reduce-scatter");
    MPI_Reduce_scatter(MPI_IN_PLACE, buf, n.data(), MPI_FLOAT, MPI_SUM, c->mpi);
    // MPI leaves the result at the front; the owned part is where the value lives
    if (own != 0) memmove(buf + own, buf, counts[c->rank] * sizeof(float));
#endif
}

// In place: buf holds the parts of counts[0..world) values of elem_bytes (2 or 4) each, back
// to back; this rank's part is its input; afterwards every rank holds every part. MPI only,
// like comm_reduce_scatter_v_f32.
inline void comm_all_gather_v(Comm* c, void* buf, const size_t* counts, size_t elem_bytes) {
    if (c->world == 1) return;
    CHECK(elem_bytes == 2 || elem_bytes == 4, "elem_bytes=%zu", elem_bytes);
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "an all-gather");
#ifdef USE_MPI
    std::vector<int> n(c->world), displs(c->world);
    size_t at = 0;
    for (int r = 0; r < c->world; r++) {
        CHECK(counts[r] <= (size_t)INT32_MAX && at <= (size_t)INT32_MAX, "counts[%d]=%zu at %zu: MPI counts are int",
              r, counts[r], at);
        n[r] = (int)counts[r];
        displs[r] = (int)at;
        at += counts[r];
    }
    CommBusy busy(c, "all-gather");
    MPI_Datatype type = elem_bytes == 4 ? MPI_FLOAT : MPI_UINT16_T;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, n.data(), displs.data(), type, c->mpi);
#endif
}

// In place: buf holds world*shard values of elem_bytes (2 or 4) each; rank r's slice is its
// input; afterwards every rank holds every slice.
inline void comm_all_gather(Comm* c, void* buf, size_t shard, size_t elem_bytes) {
    std::vector<size_t> counts(c->world, shard);
    comm_all_gather_v(c, buf, counts.data(), elem_bytes);
}

inline void comm_broadcast(Comm* c, void* buf, size_t bytes, int root) {
    if (c->world == 1) return;
    if (comm_has_engine_(c)) return c->engine.broadcast(c->engine.self, buf, bytes, root);
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a broadcast");
#ifdef USE_MPI
    CHECK(bytes <= (size_t)INT32_MAX, "bytes=%zu", bytes);
    CommBusy busy(c, "broadcast");
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, c->mpi);
#endif
}

// x[0..n) := the sum over ranks, added in rank order ((x0 + x1) + x2) + ...: with an engine
// every rank adds the gathered values; with MPI rank 0 adds them and broadcasts.
inline void comm_sum_f64(Comm* c, double* x, int n) {
    if (c->world == 1 || n == 0) return;
    if (comm_has_engine_(c)) {
        std::vector<double> all((size_t)n * c->world);
        memcpy(all.data() + (size_t)c->rank * n, x, (size_t)n * sizeof(double));
        c->engine.all_gather(c->engine.self, all.data(), (size_t)n * sizeof(double));
        for (int i = 0; i < n; i++) {
            double s = all[i];
            for (int r = 1; r < c->world; r++) s += all[(size_t)r * n + i];
            x[i] = s;
        }
        return;
    }
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a sum");
#ifdef USE_MPI
    CommBusy busy(c, "sum");
    std::vector<double> all(c->rank == 0 ? (size_t)n * c->world : 0);
    MPI_Gather(x, n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, c->mpi);
    if (c->rank == 0) {
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int r = 0; r < c->world; r++) s += all[(size_t)r * n + i];
            x[i] = s;
        }
    }
    MPI_Bcast(x, n, MPI_DOUBLE, 0, c->mpi);
#endif
}

inline double comm_sum(Comm* c, double x) {
    comm_sum_f64(c, &x, 1);
    return x;
}

inline void comm_barrier(Comm* c) {
    if (c->world == 1) return;
    if (comm_has_engine_(c)) {
        std::vector<char> all(c->world);
        return c->engine.all_gather(c->engine.self, all.data(), 1);
    }
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a barrier");
#ifdef USE_MPI
    CommBusy busy(c, "barrier");
    MPI_Barrier(c->mpi);
#endif
}

// The processes of `parent` with the same color, as a group of their own (*sub; ranks in
// order of key): tensor parallelism's group and the data-parallel group across it. MPI only;
// a world of one process splits into itself.
inline void comm_split(Comm* parent, int color, int key, Comm* sub) {
    sub->parent = parent;
    sub->timeout_s = parent->timeout_s;
    sub->threads_ok = parent->threads_ok;
    sub->local_rank = parent->local_rank;
    sub->rank = 0;
    sub->world = 1;
    if (parent->world == 1) return;
    if (parent->transport != COMM_TRANSPORT_MPI) comm_no_engine_(parent, "a split into groups");
#ifdef USE_MPI
    MPI_Comm_split(parent->mpi, color, key, &sub->mpi);
    MPI_Comm_rank(sub->mpi, &sub->rank);
    MPI_Comm_size(sub->mpi, &sub->world);
    sub->transport = COMM_TRANSPORT_MPI;
#endif
}

// x[0..n) := the sum over ranks (max: the largest), every rank's values added in rank order
// on every rank from the same gathered values, so every rank gets the same bits. MPI only
// (tensor parallelism's activations on the CPU trainer).
inline void comm_all_reduce_f32(Comm* c, float* x, size_t n, bool max = false) {
    if (c->world == 1 || n == 0) return;
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "an all-reduce");
#ifdef USE_MPI
    CHECK(n * c->world <= (size_t)INT32_MAX, "all-reduce of %zu values x %d ranks: MPI counts are int", n, c->world);
    CommBusy busy(c, "all-reduce");
    std::vector<float> all(n * c->world);
    MPI_Allgather(x, (int)n, MPI_FLOAT, all.data(), (int)n, MPI_FLOAT, c->mpi);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float s = all[i];
        for (int r = 1; r < c->world; r++) {
            const float y = all[(size_t)r * n + i];
            s = max ? (y > s ? y : s) : s + y;
        }
        x[i] = s;
    }
#endif
}

// Rank 0's root (rank 0 only; nullptr elsewhere) gets every rank's counts[r] floats, back to
// back in rank order; mine is this rank's counts[rank]. MPI only (-tp's checkpoints).
inline void comm_gather_v_f32(Comm* c, const float* mine, const size_t* counts, float* root) {
    if (c->world == 1) {
        if (counts[0] > 0) memmove(root, mine, counts[0] * sizeof(float));
        return;
    }
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a gather");
#ifdef USE_MPI
    std::vector<int> n(c->world), displs(c->world);
    size_t at = 0;
    for (int r = 0; r < c->world; r++) {
        CHECK(counts[r] <= (size_t)INT32_MAX && at <= (size_t)INT32_MAX, "counts[%d]=%zu at %zu: MPI counts are int", r,
              counts[r], at);
        n[r] = (int)counts[r];
        displs[r] = (int)at;
        at += counts[r];
    }
    CommBusy busy(c, "gather");
    MPI_Gatherv(mine, n[c->rank], MPI_FLOAT, root, n.data(), displs.data(), MPI_FLOAT, 0, c->mpi);
#endif
}

// -pp's sends and receives between neighbouring stages, MPI only. A send copies the values and
// returns at once (a blocking send could wait on a neighbour that is itself sending: 1F1B
// sends both ways); comm_sends_wait waits for every send so far. A receive waits for its values.
struct CommSends {
    std::vector<std::vector<float>> bufs;
#ifdef USE_MPI
    std::vector<MPI_Request> reqs;
#endif
};
inline void comm_isend_f32(Comm* c, CommSends* s, const float* x, size_t n, int dest, int tag) {
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a send");
#ifdef USE_MPI
    CHECK(n <= (size_t)INT32_MAX, "a send of %zu values: MPI counts are int", n);
    s->bufs.emplace_back(x, x + n);
    s->reqs.emplace_back();
    MPI_Isend(s->bufs.back().data(), (int)n, MPI_FLOAT, dest, tag, c->mpi, &s->reqs.back());
#endif
}
inline void comm_sends_wait(Comm* c, CommSends* s) {
#ifdef USE_MPI
    if (!s->reqs.empty()) {
        CommBusy busy(c, "pipeline sends");
        MPI_Waitall((int)s->reqs.size(), s->reqs.data(), MPI_STATUSES_IGNORE);
    }
    s->reqs.clear();
#endif
    s->bufs.clear();
}
inline void comm_recv_f32(Comm* c, float* x, size_t n, int src, int tag) {
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a receive");
#ifdef USE_MPI
    CHECK(n <= (size_t)INT32_MAX, "a receive of %zu values: MPI counts are int", n);
    CommBusy busy(c, "pipeline receive");
    MPI_Recv(x, (int)n, MPI_FLOAT, src, tag, c->mpi, MPI_STATUS_IGNORE);
#endif
}

// -sp's collectives (MPI only): all (world x n) := every rank's mine (n), in rank order; and
// mine (n) := the sum, in rank order, of part `rank` of every rank's all (world x n), each
// rank exchanging the parts with the others first, so every rank adds the same way.
inline void comm_all_gather_f32(Comm* c, const float* mine, size_t n, float* all) {
    if (c->world == 1) {
        memmove(all, mine, n * sizeof(float));
        return;
    }
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "an all-gather");
#ifdef USE_MPI
    CHECK(n * c->world <= (size_t)INT32_MAX, "all-gather of %zu values x %d ranks: MPI counts are int", n, c->world);
    CommBusy busy(c, "all-gather");
    MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, c->mpi);
#endif
}
inline void comm_reduce_scatter_f32(Comm* c, const float* all, size_t n, float* mine) {
    if (c->world == 1) {
        memmove(mine, all, n * sizeof(float));
        return;
    }
    if (c->transport != COMM_TRANSPORT_MPI) comm_no_engine_(c, "a reduce-scatter");
#ifdef USE_MPI
    CHECK(n * c->world <= (size_t)INT32_MAX, "reduce-scatter of %zu values x %d ranks: MPI counts are int", n, c->world);
    CommBusy busy(c, "reduce-scatter");
    std::vector<float> parts(n * c->world);  // every rank's part `rank`
    MPI_Alltoall(all, (int)n, MPI_FLOAT, parts.data(), (int)n, MPI_FLOAT, c->mpi);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float s = parts[i];
        for (int r = 1; r < c->world; r++) s += parts[(size_t)r * n + i];
        mine[i] = s;
    }
#endif
}
