// socket_base.h: what llmc/comm_socket.h's bootstrap is made of: its state (SocketComm), the
// handshake's messages, addresses, listen / connect / accept with deadlines, and the data
// mover every handshake and exchange runs on (transfers under one poll(), each bounded by
// timeout_s).
// defines: SocketComm, SocketHello, SocketChallenge, SocketProof, SocketVerdict, socket_now,
//          socket_listen, socket_connect_until, SocketTransfer, socket_run, socket_send1, socket_recv1, ...
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

#include "utils.h"   // defines: fail, CHECK, parse_int

// version 3: the bootstrap only (versions 1 and 2 also carried the collectives, over a ring)
enum { SOCKET_MAGIC = 0x67707463, SOCKET_VERSION = 3, SOCKET_DEFAULT_PORT = 12345 };
constexpr const char* SOCKET_RENDEZVOUS_FILE = "gptrain_rendezvous";
constexpr const char* SOCKET_SECRET_FILE = "gptrain_secret";
constexpr const char* SOCKET_SECRET_ENV = "GPTRAIN_SOCKET_SECRET";
constexpr const char* SOCKET_IFNAME_ENV = "GPTRAIN_SOCKET_IFNAME";
constexpr size_t SOCKET_SECRET_MIN_CHARS = 16;    // of GPTRAIN_SOCKET_SECRET
constexpr double SOCKET_HANDSHAKE_S = 5;          // to prove itself (less when timeout_s / 4 is: >= 1 s)
constexpr size_t SOCKET_MAX_PENDING = 64;         // handshakes under way at once; more wait to be accepted
constexpr int SOCKET_MAX_REFUSAL_LINES = 100;     // refusals logged; the rest are only counted

struct SocketComm {
    int rank = 0, world = 1;
    double timeout_s = 0;       // longest wait for any peer, in seconds
    double handshake_s = 0;     // longest wait for a new connection to prove itself
    std::vector<int> star;      // rank 0: star[q] = socket to rank q (star[0] unused, -1);
                                // rank r > 0: star[0] = socket to rank 0
    std::string secret;         // the HMAC key every handshake proves; empty only on loopback tcp
    uint32_t bind_ipv4 = 0;     // GPTRAIN_SOCKET_IFNAME's address (network order); 0: not set
    int refused = 0;            // connections this rank refused
    std::string rendezvous_path, rendezvous_text;  // rank 0, method fs: the file it wrote
    std::string secret_path;    // rank 0, method fs: the secret file, until every rank has joined
};

// The handshake on every connection, in network byte order. The connecting
// rank sends its hello as soon as it is connected, the listening rank its challenge as soon as
// it accepted; then the connector sends its proof, and the listener its verdict.
struct SocketHello {
    uint32_t magic, version;
    int32_t world, rank;
    uint8_t nonce[32];  // fresh random bytes, so a recorded answer of the listener is worthless
};
struct SocketChallenge {
    uint32_t magic, version;
    int32_t world, rank;  // the listener's
    uint8_t nonce[32];    // fresh random bytes, so a recorded proof is worthless
};
struct SocketProof {
    uint8_t mac[32];  // HMAC(secret, "gptrain connector\0" || hello || challenge)
};
struct SocketVerdict {
    uint32_t status;  // SOCKET_ACCEPTED, or why the listener refused
    uint8_t mac[32];  // accepted: HMAC(secret, "gptrain listener\0" || hello || challenge)
};
enum { SOCKET_ACCEPTED = 0, SOCKET_REFUSED_VERSION = 1, SOCKET_REFUSED_PROOF = 2, SOCKET_REFUSED_WORLD = 3 };
static_assert(sizeof(SocketHello) == 48 && sizeof(SocketChallenge) == 48 && sizeof(SocketVerdict) == 36,
              "handshake messages are hashed and sent as bytes: no padding");

// ----------------------------------------------------------------------------------------
// small helpers: clock, addresses, connect / listen with deadlines

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

inline std::string socket_ip_text(uint32_t ipv4_net) {
    char ip[INET_ADDRSTRLEN] = "?";
    in_addr a;
    a.s_addr = ipv4_net;
    inet_ntop(AF_INET, &a, ip, sizeof ip);
    return ip;
}

inline std::string socket_addr_text(uint32_t ipv4_net, uint16_t port_host) {
    return socket_ip_text(ipv4_net) + ":" + std::to_string(port_host);
}

// "ip:port" of this end (local) or the other end of a connected socket.
inline std::string socket_fd_text(int fd, bool local) {
    sockaddr_in sa;
    socklen_t len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    if (local) getsockname(fd, (sockaddr*)&sa, &len);
    else getpeername(fd, (sockaddr*)&sa, &len);
    return socket_addr_text(sa.sin_addr.s_addr, ntohs(sa.sin_port));
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
// *literal (when given): HOST is written as an address (or is "localhost"), so it names one
// interface the same way on every machine, unlike a host name (Debian maps a machine's own name
// to 127.0.1.1 there, to a real address everywhere else).
inline bool socket_parse_host_port(const std::string& text, uint32_t* ipv4_net, int* port,
                                   bool* literal = nullptr) {
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
    in_addr a;
    if (literal != nullptr) *literal = inet_pton(AF_INET, host.c_str(), &a) == 1 || host == "localhost";
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

// GPTRAIN_SOCKET_IFNAME's IPv4 address; fails naming the interfaces this machine has.
inline uint32_t socket_ifname_ipv4(int rank, const char* name) {
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) != 0) fail("rank %d: cannot list the network interfaces (%s)", rank, strerror(errno));
    uint32_t found = 0;
    std::string have;
    for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        uint32_t ip = ((sockaddr_in*)i->ifa_addr)->sin_addr.s_addr;
        if (found == 0 && strcmp(i->ifa_name, name) == 0) found = ip;
        have += (have.empty() ? "" : ", ") + std::string(i->ifa_name) + " " + socket_ip_text(ip);
    }
    freeifaddrs(ifs);
    if (found == 0)
        fail("rank %d: %s=%s: no interface of that name has an IPv4 address (this machine has: %s)", rank,
             SOCKET_IFNAME_ENV, name, have.c_str());
    return found;
}

inline void socket_set_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small messages go at once
}

// A non-blocking listening socket on one address (INADDR_ANY: every interface); port 0 picks a
// free one. Returns the fd and sets *bound_port; fails naming the address when it cannot.
inline int socket_listen(int rank, uint32_t ipv4_net, int port, int* bound_port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("rank %d: cannot create a socket (%s)", rank, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa = socket_sockaddr(ipv4_net, (uint16_t)port);
    if (bind(fd, (sockaddr*)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        std::string where = ipv4_net == htonl(INADDR_ANY) ? "port " + std::to_string(port)
                                                          : socket_addr_text(ipv4_net, (uint16_t)port);
        fail("rank %d: cannot listen on %s (%s)%s", rank, where.c_str(), strerror(err),
             err == EADDRNOTAVAIL ? ": not an address of this machine; GPTRAIN_SOCKET_IFNAME picks one" : "");
    }
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

// ----------------------------------------------------------------------------------------
// the data mover: every handshake and exchange is a few of these transfers, run together
// under one poll()

// One direction of one socket: send `bytes` from data, or receive them into data.
struct SocketTransfer {
    int fd = -1, peer = -1;          // peer: the rank at the other end, -1 while not known yet
    bool send = false;
    char* data = nullptr;
    size_t bytes = 0, done = 0;
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
        k = send(t->fd, t->data + t->done, t->bytes - t->done, MSG_NOSIGNAL);
    } else {
        k = recv(t->fd, t->data + t->done, t->bytes - t->done, 0);
        if (k == 0) socket_lost(c, t->peer, 0);
    }
    if (k > 0) t->done += (size_t)k;
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
            fds[m] = {t[i].fd, (short)(t[i].send ? POLLOUT : POLLIN), 0};
            which[m++] = i;
        }
        if (stalled < 0) return;
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
