// comm_socket.h: collectives between the trainer's processes over TCP sockets, without MPI.
// Any launcher starts the processes, each knowing its rank and the world size; they meet at
// rank 0 (its address read from a file in a shared directory, or given as HOST:PORT), then keep
// a star (rank 0 <-> every rank: handshake, barrier, f64 sums) and a ring (rank r -> r+1:
// reduce-scatter, all-gather, broadcast). No wait is unbounded: a peer that closes its socket,
// or sends nothing for timeout_s, stops this process with one "error:" line and exit 1, which
// closes its own sockets, so the whole world stops instead of hanging.
//
// Who may join, and where ranks listen: llmc/socket_handshake.h (the job secret, a
// challenge-response on every connection, GPTRAIN_SOCKET_IFNAME). The transport's state and
// data mover: llmc/socket_base.h.
// defines: SocketComm, socket_comm_create, socket_comm_destroy, socket_reduce_scatter_f32,
//          socket_reduce_scatter_v_f32, socket_all_gather_v,
//          socket_all_gather, socket_broadcast, socket_sum_f64, socket_barrier
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "utils.h"             // defines: fail, CHECK, parse_int
#include "socket_base.h"       // defines: SocketComm, SocketAddr, SocketTransfer, socket_run, socket_send1, ...
#include "socket_handshake.h"  // defines: socket_handshake_connect, socket_accept_rank, socket_write_secret, ...

// ----------------------------------------------------------------------------------------
// rendezvous

// Rank 0, method fs: publishes "host:port" under its final name only once it is fully on disk.
inline void socket_write_rendezvous(SocketComm* c, const std::string& path, const std::string& text) {
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("rank 0: cannot write the rendezvous file %s (%s)", tmp.c_str(), strerror(errno));
    bool ok = write(fd, text.data(), text.size()) == (ssize_t)text.size() && fsync(fd) == 0;
    int err = errno;
    close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) err = errno;
        unlink(tmp.c_str());
        fail("rank 0: cannot write the rendezvous file %s (%s)", path.c_str(), strerror(err));
    }
    c->rendezvous_path = path;
    c->rendezvous_text = text;
}

// Rank 0: admits world-1 ranks on the star listener (refusing whatever else connects) and fills
// their rows of the ring address table. `where` names what the ranks were told to look at.
inline void socket_rank0_gather(SocketComm* c, int listen_fd, const std::string& where,
                                std::vector<SocketAddr>* table) {
    std::vector<std::string> from(c->world);
    std::vector<SocketPending> pending;
    double until = socket_now() + c->timeout_s;
    for (int got = 0; got < c->world - 1; got++) {
        SocketJoined j = socket_accept_rank(c, listen_fd, "rendezvous", until, &pending);
        if (j.fd < 0) {
            std::string refused =
                c->refused == 0 ? "" : "; it refused " + std::to_string(c->refused) + " connection(s), see above";
            fail("rank 0: only %d of the %d other ranks connected within %.0f s (they look for rank 0 "
                 "at %s%s); stopping", got, c->world - 1, c->timeout_s, where.c_str(), refused.c_str());
        }
        int r = (int)ntohl((uint32_t)j.hello.rank);
        if (r < 1 || r >= c->world)
            fail("rank 0: a rank at %s says it is rank %d, outside 1..%d", j.from.c_str(), r, c->world - 1);
        if (c->star[r] >= 0)
            fail("rank %d connected twice (from %s and %s): two processes were given the same rank",
                 r, from[r].c_str(), j.from.c_str());
        c->star[r] = j.fd;
        from[r] = j.from;
        (*table)[r] = {j.hello.ipv4, j.hello.port, 0};
    }
    socket_refuse_pending(c, &pending, "rendezvous");
}

// Rank r > 0: connects to rank 0 (the fs file's address, or the tcp server), retrying while
// nobody listens there, until the timeout. Returns the star socket (method fs without
// GPTRAIN_SOCKET_SECRET: with the secret read).
inline int socket_connect_rank0(SocketComm* c, const char* method, const char* fs_dir, const char* server) {
    double until = socket_now() + c->timeout_s;
    bool fs = strcmp(method, "fs") == 0, file_secret = fs && c->secret.empty();
    std::string path = fs ? std::string(fs_dir) + "/" + SOCKET_RENDEZVOUS_FILE : "";
    std::string secret_path = fs ? std::string(fs_dir) + "/" + SOCKET_SECRET_FILE : "";
    uint32_t ip = 0;
    int port = 0;
    if (!fs && !socket_parse_host_port(server, &ip, &port))
        fail("rank %d: cannot resolve the rendezvous server \"%s\" (want HOST or HOST:PORT)", c->rank, server);
    std::string text, last = "the file never appeared";
    bool tried = false;
    for (;;) {
        if (fs) {
            text = socket_read_small_file(path);
            while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
            if (!text.empty() && !socket_parse_host_port(text, &ip, &port)) {
                last = "it holds \"" + text + "\", not HOST:PORT";
                text.clear();
            }
        }
        if (!fs || !text.empty()) {
            // bound one try so a dead host in a stale file cannot eat the whole timeout
            int fd = socket_connect_until(ip, port, std::min(until, socket_now() + 2.0));
            // the secret is read after the address it came with: rank 0 writes it first
            std::string why;
            if (fd >= 0 && file_secret && !socket_read_secret(c, secret_path, &why))
                fail("rank %d: rank 0 answers at %s, but there is %s: set %s on every rank, or on none; "
                     "stopping", c->rank, socket_addr_text(ip, (uint16_t)port).c_str(), why.c_str(),
                     SOCKET_SECRET_ENV);
            if (fd >= 0) return fd;
            // a try cut short by the deadline says nothing new: keep the error before it
            if (errno != ETIMEDOUT || !tried)
                last = socket_addr_text(ip, (uint16_t)port) + ": " + strerror(errno);
            tried = true;
        }
        if (socket_now() >= until) break;
        usleep(50 * 1000);
    }
    if (fs)
        fail("rank %d: rank 0 did not answer within %.0f s at the address in %s (%s); stopping",
             c->rank, c->timeout_s, path.c_str(), last.c_str());
    fail("rank %d: rank 0 did not answer within %.0f s at %s (%s); stopping", c->rank,
         c->timeout_s, server, last.c_str());
}

// Ring: connect to rank+1's listener and prove who we are; admit rank-1 on ours. A connector
// waits for its listener's challenge, so if every rank connected first the ring would wait on
// itself: rank 0 connects first and every other rank admits first, and the links come up in
// turn, 0 -> 1, 1 -> 2, ..., world-1 -> 0.
inline void socket_connect_ring(SocketComm* c, const std::vector<SocketAddr>& table, int ring_listen_fd) {
    int next = (c->rank + 1) % c->world, prev = (c->rank - 1 + c->world) % c->world;
    for (int step = 0; step < 2; step++) {
        double until = socket_now() + c->timeout_s;
        if ((step == 0) == (c->rank == 0)) {
            const SocketAddr& a = table[next];
            std::string next_addr = socket_addr_text(a.ipv4, ntohs(a.port));
            int err = 0;
            while (c->next_fd < 0) {
                c->next_fd = socket_connect_until(a.ipv4, ntohs(a.port), until);
                if (c->next_fd >= 0) break;
                if (errno != ETIMEDOUT || err == 0) err = errno;  // keep the reason, not the deadline
                if (socket_now() >= until)
                    fail("rank %d: cannot connect to rank %d at %s within %.0f s (%s); stopping", c->rank,
                         next, next_addr.c_str(), c->timeout_s, strerror(err));
                usleep(50 * 1000);
            }
            socket_set_options(c->next_fd);
            socket_handshake_connect(c, c->next_fd, next, next_addr, 0, 0);
        } else {
            std::vector<SocketPending> pending;
            SocketJoined j = socket_accept_rank(c, ring_listen_fd, "ring", until, &pending);
            if (j.fd < 0)
                fail("rank %d: rank %d did not connect to this rank's ring port within %.0f s; stopping",
                     c->rank, prev, c->timeout_s);
            int r = (int)ntohl((uint32_t)j.hello.rank);
            if (r != prev)
                fail("rank %d: the ring connection that should come from rank %d comes from rank %d",
                     c->rank, prev, r);
            c->prev_fd = j.fd;
            socket_refuse_pending(c, &pending, "ring");
        }
    }
}

// ----------------------------------------------------------------------------------------
// collectives

// Every rank waits until all have arrived: one byte to rank 0 and one byte back, on the star.
inline void socket_barrier(SocketComm* c) {
    if (c->world == 1) return;
    std::vector<char> bytes(c->world, 'b');
    std::vector<SocketTransfer> t;
    if (c->rank == 0) {
        for (int r = 1; r < c->world; r++) t.push_back(socket_recv_of(c->star[r], r, &bytes[r], 1));
        socket_run(c, t.data(), (int)t.size());
        t.clear();
        for (int r = 1; r < c->world; r++) t.push_back(socket_send_of(c->star[r], r, &bytes[r], 1));
        socket_run(c, t.data(), (int)t.size());
    } else {
        socket_send1(c, c->star[0], 0, &bytes[0], 1);
        socket_recv1(c, c->star[0], 0, &bytes[0], 1);
    }
}

// -pi tcp without GPTRAIN_SOCKET_SECRET runs only where nothing off this machine can reach it:
// rank 0 listening on (and the others connecting to) a loopback address.
inline void socket_check_secretless(const SocketComm* c, uint32_t ipv4_net, int port) {
    if (socket_is_loopback(ipv4_net)) {
        if (c->rank == 0)
            fprintf(stderr, "warning: rank 0: -pi tcp without %s: listening on %s only, where any process on "
                    "this machine may join as a rank; set %s on every rank to prevent it\n", SOCKET_SECRET_ENV,
                    socket_addr_text(ipv4_net, (uint16_t)port).c_str(), SOCKET_SECRET_ENV);
        return;
    }
    fail("rank %d: -pi tcp needs a job secret: set %s to the same value on every rank (e.g. `openssl rand "
         "-hex 32`), else anyone who reaches %s could join the job; only a loopback -ps (127.0.0.1, "
         "localhost) runs without one", c->rank, SOCKET_SECRET_ENV,
         ipv4_net == htonl(INADDR_ANY) ? ("port " + std::to_string(port)).c_str()
                                       : socket_addr_text(ipv4_net, (uint16_t)port).c_str());
}

// Connects the world; see the top of the file. method "fs" meets in fs_dir, "tcp" at server
// ("HOST" or "HOST:PORT"; rank 0 listens on PORT).
inline SocketComm* socket_comm_create(int rank, int world, const char* method, const char* fs_dir,
                                      const char* server, double timeout_s) {
    if (world < 1 || rank < 0 || rank >= world) fail("rank %d of world %d: no such rank", rank, world);
    if (!(timeout_s > 0)) fail("socket timeout must be positive, got %g s", timeout_s);
    bool fs = method != nullptr && strcmp(method, "fs") == 0;
    bool tcp = method != nullptr && strcmp(method, "tcp") == 0;
    if (!fs && !tcp) fail("rendezvous method \"%s\": want fs or tcp", method ? method : "(none)");
    if (fs && (fs_dir == nullptr || *fs_dir == '\0')) fail("rendezvous method fs needs a shared directory");
    if (tcp && (server == nullptr || *server == '\0')) fail("rendezvous method tcp needs HOST or HOST:PORT");

    SocketComm* c = new SocketComm;
    c->rank = rank;
    c->world = world;
    c->timeout_s = timeout_s;
    c->handshake_s = std::min(SOCKET_HANDSHAKE_S, std::max(1.0, timeout_s / 4));
    c->star.assign(world, -1);
    if (world == 1) return c;  // nothing to connect: every collective is a no-op
    c->scratch.resize(SOCKET_SCRATCH_BYTES / sizeof(float));
    const char* ifname = getenv(SOCKET_IFNAME_ENV);
    if (ifname != nullptr && *ifname != '\0') c->bind_ipv4 = socket_ifname_ipv4(rank, ifname);
    const char* secret = getenv(SOCKET_SECRET_ENV);
    if (secret != nullptr) {
        if (strlen(secret) < SOCKET_SECRET_MIN_CHARS)
            fail("rank %d: %s has %zu characters, a secret needs %zu or more (e.g. `openssl rand -hex 32`)",
                 rank, SOCKET_SECRET_ENV, strlen(secret), SOCKET_SECRET_MIN_CHARS);
        c->secret = secret;
    }
    uint32_t server_ip = 0;
    int server_port = 0;
    bool server_literal = false;
    if (tcp && !socket_parse_host_port(server, &server_ip, &server_port, &server_literal))
        fail("rank %d: cannot resolve the rendezvous server \"%s\" (want HOST or HOST:PORT)", rank, server);

    std::vector<SocketAddr> table(world);
    int ring_listen_fd = -1;
    uint32_t ring_ip = 0;
    int ring_port = 0;
    if (rank == 0) {
        int star_listen_fd = -1, port = 0;
        std::string where = server != nullptr ? server : "";
        if (fs) {
            std::string path = std::string(fs_dir) + "/" + SOCKET_RENDEZVOUS_FILE;
            std::string secret_path = std::string(fs_dir) + "/" + SOCKET_SECRET_FILE;
            for (const std::string& old : {path, secret_path})  // a dead run's, or an earlier secret
                if (unlink(old.c_str()) != 0 && errno != ENOENT)
                    fail("rank 0: cannot remove the old file %s (%s)", old.c_str(), strerror(errno));
            uint32_t ip = c->bind_ipv4 != 0 ? c->bind_ipv4 : socket_host_ipv4();
            star_listen_fd = socket_listen(rank, ip, 0, &port);
            if (c->secret.empty()) socket_write_secret(c, secret_path);
            std::string text = socket_addr_text(ip, (uint16_t)port);
            socket_write_rendezvous(c, path, text + "\n");
            where = "the address in " + path + ", " + text;
        } else {
            uint32_t ip = c->bind_ipv4 != 0 ? c->bind_ipv4 : server_literal ? server_ip : htonl(INADDR_ANY);
            if (c->secret.empty()) socket_check_secretless(c, ip, server_port);
            star_listen_fd = socket_listen(rank, ip, server_port, &port);
        }
        socket_rank0_gather(c, star_listen_fd, where, &table);
        close(star_listen_fd);
        if (!c->secret_path.empty()) unlink(c->secret_path.c_str());  // every rank has read it
        c->secret_path.clear();
        // rank world-1 connects to rank 0's ring listener: at the address it reached us at
        ring_ip = c->bind_ipv4 != 0 ? c->bind_ipv4 : socket_peer_ipv4(c->star[world - 1], true);
        ring_listen_fd = socket_listen(rank, ring_ip, 0, &ring_port);
        table[0] = {ring_ip, htons((uint16_t)ring_port), 0};
        std::vector<SocketTransfer> tables;
        for (int r = 1; r < world; r++)
            tables.push_back(socket_send_of(c->star[r], r, table.data(), table.size() * sizeof(SocketAddr)));
        socket_run(c, tables.data(), (int)tables.size());
    } else {
        if (tcp && c->secret.empty()) socket_check_secretless(c, server_ip, server_port);
        int fd = socket_connect_rank0(c, method, fs_dir, server);
        socket_set_options(fd);
        c->star[0] = fd;
        ring_ip = c->bind_ipv4 != 0 ? c->bind_ipv4 : socket_peer_ipv4(fd, true);
        ring_listen_fd = socket_listen(rank, ring_ip, 0, &ring_port);
        socket_handshake_connect(c, fd, 0, socket_fd_text(fd, false), ring_ip, ring_port);
        socket_recv1(c, fd, 0, table.data(), table.size() * sizeof(SocketAddr));
    }
    socket_connect_ring(c, table, ring_listen_fd);
    close(ring_listen_fd);
    socket_barrier(c);  // every ring link is up before any rank returns
    return c;
}

// Closes every socket; rank 0 also removes the rendezvous file if it still holds its address
// (a newer run may have replaced it already).
inline void socket_comm_destroy(SocketComm* c) {
    if (c == nullptr) return;
    for (int fd : c->star)
        if (fd >= 0) close(fd);
    if (c->next_fd >= 0) close(c->next_fd);
    if (c->prev_fd >= 0) close(c->prev_fd);
    if (!c->rendezvous_path.empty() && socket_read_small_file(c->rendezvous_path) == c->rendezvous_text)
        unlink(c->rendezvous_path.c_str());
    delete c;
}


// The slice `back` places behind `rank` on the ring: (rank - back) mod world.
inline size_t socket_ring_slice(int rank, int back, int world) {
    return (size_t)(((rank - back) % world + world) % world);
}

// Where each rank's part of a buffer cut into consecutive parts of counts[0..world) starts.
inline std::vector<size_t> socket_offsets(const size_t* counts, int world) {
    std::vector<size_t> off(world + 1, 0);
    for (int r = 0; r < world; r++) off[r + 1] = off[r] + counts[r];
    return off;
}

// Ring reduce-scatter of float sums, in place. buf holds the parts of counts[0..world) floats
// back to back (part s belongs to rank s; parts may differ in size, or be empty); afterwards
// this rank's part holds the sum over ranks of that part, the other parts hold partial sums.
// At step k = 0..world-2 rank r sends part r-k-1 to rank r+1 and adds part r-k-2 arriving from
// rank r-1 into its own (indices mod world). So part s starts at rank s+1 and travels
// s+1 -> s+2 -> ... -> s, each rank adding its values as it passes: every element of part s is
// (((x[s+1] + x[s+2]) + x[s+3]) + ...) + x[s], in that order whatever the timing, hence the
// same bits on every run.
inline void socket_reduce_scatter_v_f32(SocketComm* c, float* buf, const size_t* counts) {
    int W = c->world, r = c->rank, next = (r + 1) % W, prev = (r - 1 + W) % W;
    if (W == 1) return;
    std::vector<size_t> off = socket_offsets(counts, W);
    for (int k = 0; k < W - 1; k++) {
        size_t out = socket_ring_slice(r, k + 1, W), in = socket_ring_slice(r, k + 2, W);
        SocketTransfer t[2] = {socket_send_of(c->next_fd, next, buf + off[out], counts[out] * sizeof(float)),
                               socket_recv_of(c->prev_fd, prev, buf + off[in], counts[in] * sizeof(float))};
        t[1].add_f32 = true;
        socket_run(c, t, 2);
    }
}

// The same with equal parts: buf holds world*shard floats, rank r's part at r*shard.
inline void socket_reduce_scatter_f32(SocketComm* c, float* buf, size_t shard) {
    std::vector<size_t> counts(c->world, shard);
    socket_reduce_scatter_v_f32(c, buf, counts.data());
}

// Ring all-gather in place, any element type: buf holds parts of counts_bytes[0..world) bytes
// back to back; this rank's part is its input, and afterwards every rank holds every part.
// At step k rank r passes on part r-k and receives part r-k-1.
inline void socket_all_gather_v(SocketComm* c, void* buf, const size_t* counts_bytes) {
    int W = c->world, r = c->rank, next = (r + 1) % W, prev = (r - 1 + W) % W;
    if (W == 1) return;
    std::vector<size_t> off = socket_offsets(counts_bytes, W);
    char* b = (char*)buf;
    for (int k = 0; k < W - 1; k++) {
        size_t out = socket_ring_slice(r, k, W), in = socket_ring_slice(r, k + 1, W);
        SocketTransfer t[2] = {socket_send_of(c->next_fd, next, b + off[out], counts_bytes[out]),
                               socket_recv_of(c->prev_fd, prev, b + off[in], counts_bytes[in])};
        socket_run(c, t, 2);
    }
}

// The same with equal parts of shard_bytes, rank r's at r*shard_bytes.
inline void socket_all_gather(SocketComm* c, void* buf, size_t shard_bytes) {
    std::vector<size_t> counts(c->world, shard_bytes);
    socket_all_gather_v(c, buf, counts.data());
}

// buf (bytes) from root to every rank, along the ring: each rank forwards bytes as they arrive,
// so a big buffer crosses each link once, pipelined.
inline void socket_broadcast(SocketComm* c, void* buf, size_t bytes, int root) {
    CHECK(root >= 0 && root < c->world, "root=%d world=%d", root, c->world);
    if (c->world == 1 || bytes == 0) return;
    int W = c->world, r = c->rank, next = (r + 1) % W, prev = (r - 1 + W) % W;
    if (r == root) {
        socket_send1(c, c->next_fd, next, buf, bytes);
        return;
    }
    SocketTransfer t[2] = {socket_recv_of(c->prev_fd, prev, buf, bytes),
                           socket_send_of(c->next_fd, next, buf, bytes)};
    t[1].ready = &t[0].done;
    socket_run(c, t, next == root ? 1 : 2);  // the last rank before root forwards nothing
}

// x[0..n) := the sum over ranks, added in rank order ((x0 + x1) + x2) + ... on rank 0, then
// sent back: the same bits on every rank.
inline void socket_sum_f64(SocketComm* c, double* x, int n) {
    CHECK(n >= 0, "n=%d", n);
    if (c->world == 1 || n == 0) return;
    size_t bytes = (size_t)n * sizeof(double);
    if (c->rank != 0) {
        socket_send1(c, c->star[0], 0, x, bytes);
        socket_recv1(c, c->star[0], 0, x, bytes);
        return;
    }
    std::vector<double> theirs((size_t)(c->world - 1) * n);
    std::vector<SocketTransfer> t;
    for (int r = 1; r < c->world; r++)
        t.push_back(socket_recv_of(c->star[r], r, theirs.data() + (size_t)(r - 1) * n, bytes));
    socket_run(c, t.data(), (int)t.size());
    for (int r = 1; r < c->world; r++)
        for (int i = 0; i < n; i++) x[i] += theirs[(size_t)(r - 1) * n + i];
    t.clear();
    for (int r = 1; r < c->world; r++) t.push_back(socket_send_of(c->star[r], r, x, bytes));
    socket_run(c, t.data(), (int)t.size());
}
