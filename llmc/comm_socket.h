// comm_socket.h: collectives between the trainer's processes over TCP sockets, without MPI.
// Any launcher starts the processes, each knowing its rank and the world size; they meet at
// rank 0 (its address read from a file in a shared directory, or given as HOST:PORT), then keep
// a star (rank 0 <-> every rank: handshake, barrier, f64 sums) and a ring (rank r -> r+1:
// reduce-scatter, all-gather, broadcast). No wait is unbounded: a peer that closes its socket,
// or sends nothing for timeout_s, stops this process with one "error:" line and exit 1, which
// closes its own sockets, so the whole world stops instead of hanging.
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
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, CHECK, parse_int

enum { SOCKET_MAGIC = 0x67707463, SOCKET_VERSION = 1, SOCKET_DEFAULT_PORT = 12345 };
constexpr const char* SOCKET_RENDEZVOUS_FILE = "gptrain_rendezvous";
constexpr size_t SOCKET_SCRATCH_BYTES = 1 << 20;  // reduce-scatter receives through this

struct SocketComm {
    int rank = 0, world = 1;
    double timeout_s = 0;       // longest wait for any peer, in seconds
    std::vector<int> star;      // rank 0: star[q] = socket to rank q (star[0] unused, -1);
                                // rank r > 0: star[0] = socket to rank 0
    int next_fd = -1;           // ring: socket to rank (rank+1) % world
    int prev_fd = -1;           // ring: socket from rank (rank-1+world) % world
    std::string rendezvous_path, rendezvous_text;  // rank 0, method fs: the file it wrote
    std::vector<float> scratch; // SOCKET_SCRATCH_BYTES; float so the adds read aligned floats
};

// The first message on every connection, in network byte order: who is talking, and (star only)
// where its ring listener is. Rank 0 answers each rank with its own hello, then the address table.
struct SocketHello {
    uint32_t magic, version;
    int32_t world, rank;
    uint32_t ipv4;  // already network order (in_addr.s_addr)
    uint16_t port;  // network order
    uint16_t unused;
};
struct SocketAddr {
    uint32_t ipv4;  // network order
    uint16_t port;  // network order
    uint16_t unused;
};

// ----------------------------------------------------------------------------------------
// small helpers: clock, addresses, connect / listen / accept with deadlines

inline double socket_now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Milliseconds for poll() until `until` (monotonic seconds), at least 1 while time is left.
inline int socket_poll_ms(double until) {
    double left = until - socket_now();
    if (left <= 0) return 0;
    double ms = left * 1000 + 1;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

inline std::string socket_addr_text(uint32_t ipv4_net, uint16_t port_host) {
    char ip[INET_ADDRSTRLEN] = "?";
    in_addr a;
    a.s_addr = ipv4_net;
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(port_host);
}

inline sockaddr_in socket_sockaddr(uint32_t ipv4_net, uint16_t port_host) {
    sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = ipv4_net;
    sa.sin_port = htons(port_host);
    return sa;
}

// "HOST" or "HOST:PORT" -> IPv4 address and port; false when HOST does not resolve or PORT is bad.
inline bool socket_parse_host_port(const std::string& text, uint32_t* ipv4_net, int* port) {
    std::string host = text;
    *port = SOCKET_DEFAULT_PORT;
    size_t colon = text.rfind(':');
    if (colon != std::string::npos) {
        long long p;
        if (!parse_int(text.c_str() + colon + 1, 1, 65535, &p)) return false;
        *port = (int)p;
        host = text.substr(0, colon);
    }
    if (host.empty()) return false;
    addrinfo hints, *res = nullptr;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
    *ipv4_net = ((sockaddr_in*)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
    return true;
}

inline bool socket_is_loopback(uint32_t ipv4_net) { return (ntohl(ipv4_net) >> 24) == 127; }

// The IPv4 address other machines reach this one at, for the fs rendezvous file: the host
// name's address; if that is only loopback (Debian maps the host name to 127.0.1.1), the first
// non-loopback interface's; else 127.0.0.1, which still serves every rank on this machine.
inline uint32_t socket_host_ipv4() {
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) == 0) {
        addrinfo hints, *res = nullptr;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(name, nullptr, &hints, &res) == 0) {
            uint32_t found = 0;
            for (addrinfo* a = res; a != nullptr && found == 0; a = a->ai_next) {
                uint32_t ip = ((sockaddr_in*)a->ai_addr)->sin_addr.s_addr;
                if (ip != 0 && !socket_is_loopback(ip)) found = ip;
            }
            freeaddrinfo(res);
            if (found != 0) return found;
        }
    }
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) == 0) {
        uint32_t found = 0;
        for (ifaddrs* i = ifs; i != nullptr && found == 0; i = i->ifa_next) {
            if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
            uint32_t ip = ((sockaddr_in*)i->ifa_addr)->sin_addr.s_addr;
            if (ip != 0 && !socket_is_loopback(ip)) found = ip;
        }
        freeifaddrs(ifs);
        if (found != 0) return found;
    }
    return htonl(INADDR_LOOPBACK);
}

inline void socket_set_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small messages go at once
}

// A non-blocking listening socket on every interface; port 0 picks a free one. Returns the fd
// and sets *bound_port; fails naming the port when it is taken.
inline int socket_listen_any(int rank, int port, int* bound_port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("rank %d: cannot create a socket (%s)", rank, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa = socket_sockaddr(htonl(INADDR_ANY), (uint16_t)port);
    if (bind(fd, (sockaddr*)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0)
        fail("rank %d: cannot listen on port %d (%s)", rank, port, strerror(errno));
    socklen_t len = sizeof sa;
    getsockname(fd, (sockaddr*)&sa, &len);
    *bound_port = ntohs(sa.sin_port);
    return fd;
}

// Connects to ipv4:port, waiting at most until `until`. Returns the non-blocking socket, or -1
// with errno saying why (ECONNREFUSED: nobody listens there yet).
inline int socket_connect_until(uint32_t ipv4_net, int port, double until) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("cannot create a socket (%s)", strerror(errno));
    sockaddr_in sa = socket_sockaddr(ipv4_net, (uint16_t)port);
    if (connect(fd, (sockaddr*)&sa, sizeof sa) == 0) return fd;
    int err = errno;
    while (err == EINPROGRESS) {
        pollfd p = {fd, POLLOUT, 0};
        int ms = socket_poll_ms(until);
        if (ms == 0) { err = ETIMEDOUT; break; }
        int rc = poll(&p, 1, ms);
        if (rc < 0 && errno != EINTR) { err = errno; break; }
        if (rc <= 0) continue;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        if (err == 0) return fd;
    }
    close(fd);
    errno = err;
    return -1;
}

// Accepts one connection on a non-blocking listener; -1 if none came by `until`.
inline int socket_accept_until(int listen_fd, double until) {
    for (;;) {
        int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) return fd;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            fail("accept failed (%s)", strerror(errno));
        int ms = socket_poll_ms(until);
        if (ms == 0) return -1;
        pollfd p = {listen_fd, POLLIN, 0};
        poll(&p, 1, ms);
    }
}

inline uint32_t socket_peer_ipv4(int fd, bool local) {
    sockaddr_in sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    if (local) getsockname(fd, (sockaddr*)&sa, &len);
    else getpeername(fd, (sockaddr*)&sa, &len);
    return sa.sin_addr.s_addr;
}

// ----------------------------------------------------------------------------------------
// the data mover: every collective is a few of these transfers, run together under one poll()

// One direction of one socket: send `bytes` from data, or receive them into data.
struct SocketTransfer {
    int fd = -1, peer = -1;          // peer: the rank at the other end, -1 while not known yet
    bool send = false;
    char* data = nullptr;
    size_t bytes = 0, done = 0;
    bool add_f32 = false;            // receive: data (floats) += what arrives, via c->scratch
    const size_t* ready = nullptr;   // send: only data[0, *ready) may go yet (a forwarded receive)
};

inline std::string socket_peer_name(int peer) {
    return peer >= 0 ? "rank " + std::to_string(peer) : std::string("a process connecting to rank 0");
}

[[noreturn]] inline void socket_lost(const SocketComm* c, int peer, int err) {
    fail("rank %d: lost the connection to %s (%s): it exited or crashed; stopping", c->rank,
         socket_peer_name(peer).c_str(), err == 0 ? "connection closed" : strerror(err));
}

inline int socket_error_of(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
}

// Moves bytes on one transfer whose socket poll() reported ready; true if any moved.
inline bool socket_transfer_step(SocketComm* c, SocketTransfer* t, short revents) {
    ssize_t k;
    if (t->send) {
        size_t limit = t->ready != nullptr ? *t->ready : t->bytes;
        k = send(t->fd, t->data + t->done, limit - t->done, MSG_NOSIGNAL);
        if (k > 0) t->done += (size_t)k;
    } else if (!t->add_f32) {
        k = recv(t->fd, t->data + t->done, t->bytes - t->done, 0);
        if (k == 0) socket_lost(c, t->peer, 0);
        if (k > 0) t->done += (size_t)k;
    } else {
        // The bytes of a float split across two receives wait at the front of the scratch.
        char* s = (char*)c->scratch.data();
        size_t pending = t->done % sizeof(float);
        size_t first = (t->done - pending) / sizeof(float);  // float index s[0] lands on
        size_t want = std::min(SOCKET_SCRATCH_BYTES - pending, t->bytes - t->done);
        k = recv(t->fd, s + pending, want, 0);
        if (k == 0) socket_lost(c, t->peer, 0);
        if (k > 0) {
            t->done += (size_t)k;
            size_t have = pending + (size_t)k, nf = have / sizeof(float);
            float* dst = (float*)t->data + first;
            const float* src = c->scratch.data();
            for (size_t i = 0; i < nf; i++) dst[i] += src[i];
            memmove(s, s + nf * sizeof(float), have - nf * sizeof(float));
        }
    }
    if (k > 0) return true;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (revents & (POLLERR | POLLHUP)) socket_lost(c, t->peer, socket_error_of(t->fd));
        return false;
    }
    socket_lost(c, t->peer, errno);
}

// Runs the n transfers to completion, moving bytes on each socket as it becomes ready, so a
// rank sends and receives at once and big buffers cannot deadlock. Fails when nothing moved
// for c->timeout_s, naming the peer it waited on.
inline void socket_run(SocketComm* c, SocketTransfer* t, int n) {
    std::vector<pollfd> fds(n);
    std::vector<int> which(n);
    double last_progress = socket_now();
    for (;;) {
        int m = 0, stalled = -1;
        for (int i = 0; i < n; i++) {
            if (t[i].done == t[i].bytes) continue;
            if (stalled < 0 || (!t[i].send && t[stalled].send)) stalled = i;  // prefer a receive
            if (t[i].send && t[i].ready != nullptr && *t[i].ready == t[i].done) continue;
            fds[m] = {t[i].fd, (short)(t[i].send ? POLLOUT : POLLIN), 0};
            which[m++] = i;
        }
        if (stalled < 0) return;
        CHECK(m > 0, "transfer %d waits on a forwarded receive that is finished", stalled);
        int ms = socket_poll_ms(last_progress + c->timeout_s);
        if (ms == 0) {
            const SocketTransfer& s = t[stalled];
            if (s.send)
                fail("rank %d: %s took no data for %.0f s: it hung or died; stopping", c->rank,
                     socket_peer_name(s.peer).c_str(), c->timeout_s);
            fail("rank %d: no data from %s for %.0f s: it hung or died; stopping", c->rank,
                 socket_peer_name(s.peer).c_str(), c->timeout_s);
        }
        int rc = poll(fds.data(), m, ms);
        if (rc < 0 && errno != EINTR) fail("rank %d: poll failed (%s)", c->rank, strerror(errno));
        if (rc <= 0) continue;
        bool progress = false;
        for (int j = 0; j < m; j++) {
            if (fds[j].revents == 0) continue;
            CHECK(!(fds[j].revents & POLLNVAL), "rank %d: socket %d is not open", c->rank, fds[j].fd);
            progress |= socket_transfer_step(c, &t[which[j]], fds[j].revents);
        }
        if (progress) last_progress = socket_now();
    }
}

inline SocketTransfer socket_send_of(int fd, int peer, const void* data, size_t bytes) {
    SocketTransfer t;
    t.fd = fd; t.peer = peer; t.send = true; t.data = (char*)data; t.bytes = bytes;
    return t;
}
inline SocketTransfer socket_recv_of(int fd, int peer, void* data, size_t bytes) {
    SocketTransfer t;
    t.fd = fd; t.peer = peer; t.data = (char*)data; t.bytes = bytes;
    return t;
}
inline void socket_send1(SocketComm* c, int fd, int peer, const void* data, size_t bytes) {
    SocketTransfer t = socket_send_of(fd, peer, data, bytes);
    socket_run(c, &t, 1);
}
inline void socket_recv1(SocketComm* c, int fd, int peer, void* data, size_t bytes) {
    SocketTransfer t = socket_recv_of(fd, peer, data, bytes);
    socket_run(c, &t, 1);
}

// ----------------------------------------------------------------------------------------
// rendezvous

inline SocketHello socket_hello(const SocketComm* c, uint32_t ipv4_net, int port) {
    SocketHello h;
    h.magic = htonl(SOCKET_MAGIC);
    h.version = htonl(SOCKET_VERSION);
    h.world = (int32_t)htonl((uint32_t)c->world);
    h.rank = (int32_t)htonl((uint32_t)c->rank);
    h.ipv4 = ipv4_net;
    h.port = htons((uint16_t)port);
    h.unused = 0;
    return h;
}

// Hello from `from` (an address, for messages) is a gptrain rank of this protocol and world.
inline void socket_check_hello(const SocketComm* c, const SocketHello& h, const std::string& from) {
    if (ntohl(h.magic) != SOCKET_MAGIC)
        fail("rank %d: %s is not a gptrain rank (bad handshake); stopping", c->rank, from.c_str());
    if (ntohl(h.version) != SOCKET_VERSION)
        fail("rank %d: %s speaks socket protocol version %u, this rank version %d: build every rank "
             "from the same source", c->rank, from.c_str(), ntohl(h.version), SOCKET_VERSION);
    int world = (int)ntohl((uint32_t)h.world), rank = (int)ntohl((uint32_t)h.rank);
    if (world != c->world)
        fail("rank %d says world size %d, rank %d has %d", rank, world, c->rank, c->world);
}

inline std::string socket_read_small_file(const std::string& path) {
    std::string text;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return text;
    char buf[256];
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k > 0) text.assign(buf, (size_t)k);
    return text;
}

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

// Rank 0: accepts world-1 ranks on the star listener, checks their hellos, fills the ring
// address table and sends it to everyone. `where` names what the ranks were told to look at.
inline void socket_rank0_gather(SocketComm* c, int listen_fd, int ring_port, const std::string& where,
                                std::vector<SocketAddr>* table) {
    std::vector<std::string> from(c->world);
    double until = socket_now() + c->timeout_s;
    for (int got = 0; got < c->world - 1; got++) {
        int fd = socket_accept_until(listen_fd, until);
        if (fd < 0)
            fail("rank 0: only %d of the %d other ranks connected within %.0f s (they look for rank 0 "
                 "at %s); stopping", got, c->world - 1, c->timeout_s, where.c_str());
        socket_set_options(fd);
        char ip[INET_ADDRSTRLEN] = "?";
        in_addr a;
        a.s_addr = socket_peer_ipv4(fd, false);
        inet_ntop(AF_INET, &a, ip, sizeof ip);
        std::string addr = ip;
        SocketHello h;
        socket_recv1(c, fd, -1, &h, sizeof h);
        socket_check_hello(c, h, "a process at " + addr);
        int r = (int)ntohl((uint32_t)h.rank);
        if (r < 1 || r >= c->world)
            fail("rank 0: a process at %s says it is rank %d, outside 1..%d", addr.c_str(), r, c->world - 1);
        if (c->star[r] >= 0)
            fail("rank %d connected twice (from %s and %s): two processes were given the same rank",
                 r, from[r].c_str(), addr.c_str());
        c->star[r] = fd;
        from[r] = addr;
        (*table)[r] = {h.ipv4, h.port, 0};
    }
    // Rank world-1 connects to rank 0's ring listener: give it the address it already reached us at.
    (*table)[0] = {socket_peer_ipv4(c->star[c->world - 1], true), htons((uint16_t)ring_port), 0};
    SocketHello h0 = socket_hello(c, (*table)[0].ipv4, ring_port);
    std::vector<SocketTransfer> hellos, tables;  // one socket's two messages go one after the other
    for (int r = 1; r < c->world; r++) {
        hellos.push_back(socket_send_of(c->star[r], r, &h0, sizeof h0));
        tables.push_back(socket_send_of(c->star[r], r, table->data(), table->size() * sizeof(SocketAddr)));
    }
    socket_run(c, hellos.data(), (int)hellos.size());
    socket_run(c, tables.data(), (int)tables.size());
}

// Rank r > 0: connects to rank 0 (the fs file's address, or the tcp server), retrying while
// nobody listens there, until the timeout. Returns the star socket.
inline int socket_connect_rank0(SocketComm* c, const char* method, const char* fs_dir, const char* server) {
    double until = socket_now() + c->timeout_s;
    bool fs = strcmp(method, "fs") == 0;
    std::string path = fs ? std::string(fs_dir) + "/" + SOCKET_RENDEZVOUS_FILE : "";
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

// Ring: connect to rank+1's listener and say who we are; accept rank-1 and check who it is.
inline void socket_connect_ring(SocketComm* c, const std::vector<SocketAddr>& table, int ring_listen_fd) {
    int next = (c->rank + 1) % c->world, prev = (c->rank - 1 + c->world) % c->world;
    double until = socket_now() + c->timeout_s;
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
    SocketHello mine = socket_hello(c, 0, 0);
    socket_send1(c, c->next_fd, next, &mine, sizeof mine);

    c->prev_fd = socket_accept_until(ring_listen_fd, until);
    if (c->prev_fd < 0)
        fail("rank %d: rank %d did not connect to this rank's ring port within %.0f s; stopping",
             c->rank, prev, c->timeout_s);
    socket_set_options(c->prev_fd);
    SocketHello h;
    socket_recv1(c, c->prev_fd, prev, &h, sizeof h);
    socket_check_hello(c, h, "the ring connection from rank " + std::to_string(prev));
    int r = (int)ntohl((uint32_t)h.rank);
    if (r != prev)
        fail("rank %d: the ring connection that should come from rank %d comes from rank %d",
             c->rank, prev, r);
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

// Connects the world; see the top of the file. method "fs" meets in fs_dir, "tcp" at server
// ("HOST" or "HOST:PORT"; rank 0 listens on PORT on every interface).
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
    c->star.assign(world, -1);
    if (world == 1) return c;  // nothing to connect: every collective is a no-op
    c->scratch.resize(SOCKET_SCRATCH_BYTES / sizeof(float));

    int ring_port = 0;
    int ring_listen_fd = socket_listen_any(rank, 0, &ring_port);
    std::vector<SocketAddr> table(world);
    if (rank == 0) {
        int port = 0;
        if (fs) {
            std::string path = std::string(fs_dir) + "/" + SOCKET_RENDEZVOUS_FILE;
            if (unlink(path.c_str()) != 0 && errno != ENOENT)
                fail("rank 0: cannot remove the old rendezvous file %s (%s)", path.c_str(), strerror(errno));
            int star_listen_fd = socket_listen_any(rank, 0, &port);
            std::string text = socket_addr_text(socket_host_ipv4(), (uint16_t)port);
            socket_write_rendezvous(c, path, text + "\n");
            socket_rank0_gather(c, star_listen_fd, ring_port, "the address in " + path + ", " + text, &table);
            close(star_listen_fd);
        } else {
            uint32_t ip;
            if (!socket_parse_host_port(server, &ip, &port))
                fail("rank 0: cannot resolve the rendezvous server \"%s\" (want HOST or HOST:PORT)", server);
            int bound;
            int star_listen_fd = socket_listen_any(rank, port, &bound);
            socket_rank0_gather(c, star_listen_fd, ring_port, server, &table);
            close(star_listen_fd);
        }
    } else {
        int fd = socket_connect_rank0(c, method, fs_dir, server);
        socket_set_options(fd);
        c->star[0] = fd;
        SocketHello mine = socket_hello(c, socket_peer_ipv4(fd, true), ring_port);
        socket_send1(c, fd, 0, &mine, sizeof mine);
        SocketHello h0;
        socket_recv1(c, fd, 0, &h0, sizeof h0);
        socket_check_hello(c, h0, "rank 0");
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
