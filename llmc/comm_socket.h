// comm_socket.h: the bootstrap of processes started without MPI (-pi fs, -pi tcp). Any
// launcher starts them, each knowing its rank and the world size; they meet at rank 0 (its
// address read from a file in a shared directory, or given as HOST:PORT), each rank proving it
// knows the job's secret, and keep that star (rank 0 <-> every rank) for one collective: the
// exchange of a small record per rank (which GPU each rank drives, NCCL's id). That is all the
// sockets carry: the training's collectives are NCCL's on the GPU and MPI's on the CPU
// (llmc/comm.h), so a job without MPI is a GPU job. No wait is unbounded: a peer that closes
// its socket, or sends nothing for timeout_s, stops this process with one "error:" line and
// exit 1, which closes its own sockets, so the whole world stops instead of hanging.
//
// Who may join, and where rank 0 listens: llmc/socket_handshake.h (the job secret, a
// challenge-response on every connection, GPTRAIN_SOCKET_IFNAME). The state and data mover:
// llmc/socket_base.h.
// defines: SocketComm, socket_comm_create, socket_comm_destroy, socket_exchange
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
#include "socket_base.h"       // defines: SocketComm, SocketTransfer, socket_run, socket_send1, ...
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

// Rank 0: admits world-1 ranks on the star listener (refusing whatever else connects). `where`
// names what the ranks were told to look at.
inline void socket_rank0_gather(SocketComm* c, int listen_fd, const std::string& where) {
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

// ----------------------------------------------------------------------------------------
// the exchange

// Each rank's record of `bytes` (the same size on every rank) to every rank, through rank 0:
// afterwards all[r * bytes, (r + 1) * bytes) holds rank r's. Every rank waits until all have
// arrived, so it is a barrier too.
inline void socket_exchange(SocketComm* c, const void* mine, size_t bytes, void* all) {
    char* out = (char*)all;
    if (bytes > 0) memmove(out + (size_t)c->rank * bytes, mine, bytes);
    if (c->world == 1) return;
    size_t total = (size_t)c->world * bytes;
    if (c->rank != 0) {
        // a byte more than the record, so a 0-byte exchange still waits for everyone
        std::vector<char> wire(bytes + 1, 'x');
        if (bytes > 0) memcpy(wire.data(), mine, bytes);
        socket_send1(c, c->star[0], 0, wire.data(), wire.size());
        std::vector<char> back(total + 1);
        socket_recv1(c, c->star[0], 0, back.data(), back.size());
        if (total > 0) memcpy(out, back.data(), total);
        return;
    }
    std::vector<char> got((size_t)c->world * (bytes + 1));
    std::vector<SocketTransfer> t;
    for (int r = 1; r < c->world; r++)
        t.push_back(socket_recv_of(c->star[r], r, got.data() + (size_t)r * (bytes + 1), bytes + 1));
    socket_run(c, t.data(), (int)t.size());
    std::vector<char> wire(total + 1, 'x');
    for (int r = 0; r < c->world; r++) {
        if (r > 0 && bytes > 0) memcpy(out + (size_t)r * bytes, got.data() + (size_t)r * (bytes + 1), bytes);
        if (bytes > 0) memcpy(wire.data() + (size_t)r * bytes, out + (size_t)r * bytes, bytes);
    }
    t.clear();
    for (int r = 1; r < c->world; r++) t.push_back(socket_send_of(c->star[r], r, wire.data(), wire.size()));
    socket_run(c, t.data(), (int)t.size());
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
    if (world == 1) return c;  // nothing to connect: the exchange is a copy
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
        socket_rank0_gather(c, star_listen_fd, where);
        close(star_listen_fd);
        if (!c->secret_path.empty()) unlink(c->secret_path.c_str());  // every rank has read it
        c->secret_path.clear();
    } else {
        if (tcp && c->secret.empty()) socket_check_secretless(c, server_ip, server_port);
        int fd = socket_connect_rank0(c, method, fs_dir, server);
        socket_set_options(fd);
        c->star[0] = fd;
        socket_handshake_connect(c, fd, 0, socket_fd_text(fd, false));
    }
    socket_exchange(c, nullptr, 0, nullptr);  // every rank has joined before any returns
    return c;
}

// Closes every socket; rank 0 also removes the rendezvous file if it still holds its address
// (a newer run may have replaced it already).
inline void socket_comm_destroy(SocketComm* c) {
    if (c == nullptr) return;
    for (int fd : c->star)
        if (fd >= 0) close(fd);
    if (!c->rendezvous_path.empty() && socket_read_small_file(c->rendezvous_path) == c->rendezvous_text)
        unlink(c->rendezvous_path.c_str());
    delete c;
}

