// socket_handshake.h: who may join a run of llmc/comm_socket.h: the job secret, and the
// challenge-response every connection opens with.
//
// Who may join. Every connection to rank 0 opens with a challenge-response on a job secret
// that never crosses the wire: each side sends a fresh random nonce, the connecting rank proves
// it knows the secret with HMAC-SHA256(secret, its hello || the listener's challenge), and only
// then does the listener prove itself back the same way (another label), so no rank talks on to
// an impostor either. Anything else that connects (another program, garbage, a port scan, a
// wrong proof, another world size, silence past a few seconds) is refused with one "warning:"
// line on stderr naming its address and why, and the listener goes on waiting for the real
// ranks; it runs every handshake under way at once, so a silent connection holds up nobody.
// The secret:
//   GPTRAIN_SOCKET_SECRET  the same value on every rank, 16 characters or more (`openssl rand
//                          -hex 32`); when set it is the secret, whatever the method
//   -pi fs                 otherwise rank 0 writes 32 random bytes (as hex) to DIR/gptrain_secret,
//                          born mode 0600, before its address; the others read it (it must be
//                          their user's and closed to others) and rank 0 deletes it once all joined
//   -pi tcp                otherwise only a loopback -ps (127.x.x.x, localhost) may run, with a
//                          warning that any process on the machine could join; others are an error
// Where it listens (rank 0 only: the other ranks connect and never listen).
// GPTRAIN_SOCKET_IFNAME=NAME (an interface's exact name, as `ip addr` shows it): rank 0 binds
// NAME's IPv4 address, and (-pi fs) that is the address the others are told. Without it rank 0
// listens on the address it advertises (-pi fs: the host name's), or on -ps's HOST when that is
// an address (10.0.0.5, 127.0.0.1, localhost), else (a host name) on every interface.
// The bytes after the handshakes (the exchanged records: NCCL's id) are neither encrypted nor
// authenticated: like NCCL's and MPI's traffic, they belong on a network only the job's
// machines reach.
// defines: socket_random_bytes, socket_write_secret, socket_read_secret, socket_hello, socket_mac,
//          socket_handshake_connect, SocketPending, SocketJoined, socket_refuse, socket_accept_rank,
//          socket_refuse_pending
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "sha256.h"       // defines: hmac_sha256_init, hmac_sha256_update, hmac_sha256_final, digest_equal
#include "socket_base.h"  // defines: SocketComm, SocketHello, SocketTransfer, socket_run, socket_listen, ...

// ----------------------------------------------------------------------------------------
// the job secret

inline void socket_random_bytes(void* out, size_t bytes) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    while (fd >= 0 && got < bytes) {
        ssize_t k = read(fd, (char*)out + got, bytes - got);
        if (k > 0) got += (size_t)k;
        else if (k == 0 || errno != EINTR) break;
    }
    int err = errno;
    if (fd >= 0) close(fd);
    if (got != bytes) fail("cannot read random bytes from /dev/urandom (%s)", strerror(err));
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

// Rank 0, method fs, no GPTRAIN_SOCKET_SECRET: 32 random bytes, as 64 hex digits, into path.
// The file is born owner-only under a name of its own (O_EXCL, mode 0600: nobody else can open
// it between its creation and a chmod, and no reader sees it half written), then renamed into
// place, before the rendezvous file tells anyone where rank 0 is.
inline void socket_write_secret(SocketComm* c, const std::string& path) {
    uint8_t raw[32];
    socket_random_bytes(raw, sizeof raw);
    static const char digits[] = "0123456789abcdef";
    c->secret.clear();
    for (uint8_t b : raw) c->secret += std::string(1, digits[b >> 4]) + digits[b & 15];
    std::string text = c->secret + "\n", tmp = path + ".tmp." + std::to_string(getpid());
    unlink(tmp.c_str());  // left by a dead process that had our pid
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) fail("rank 0: cannot create the secret file %s (%s)", tmp.c_str(), strerror(errno));
    // fchmod: a umask can take the owner's read bit away from 0600, and the other ranks need it
    bool ok = fchmod(fd, 0600) == 0 && write(fd, text.data(), text.size()) == (ssize_t)text.size() &&
              fsync(fd) == 0;
    int err = errno;
    close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) err = errno;
        unlink(tmp.c_str());
        fail("rank 0: cannot write the secret file %s (%s)", path.c_str(), strerror(err));
    }
    c->secret_path = path;
}

// Rank r > 0, method fs, no GPTRAIN_SOCKET_SECRET: the secret rank 0 wrote to path. false, with
// *why, while there is none; fails when it is not this user's file closed to everyone else (then
// another user could have read or planted it).
inline bool socket_read_secret(SocketComm* c, const std::string& path, std::string* why) {
    int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ELOOP)
        fail("rank %d: the secret file %s is a symbolic link; stopping", c->rank, path.c_str());
    if (fd < 0) {
        *why = "no secret file: " + path + ": " + strerror(errno);
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        fail("rank %d: the secret file %s has mode %04o and owner uid %d: it must be a file of this user "
             "(uid %d) that nobody else may read or write (mode 0600); stopping", c->rank, path.c_str(),
             (unsigned)(st.st_mode & 07777), (int)st.st_uid, (int)geteuid());
    }
    char buf[80];
    ssize_t k = read(fd, buf, sizeof buf);
    close(fd);
    std::string text(buf, k > 0 ? (size_t)k : 0);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (text.size() != 64 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
        fail("rank %d: the secret file %s does not hold 64 hex digits; stopping", c->rank, path.c_str());
    c->secret = text;
    return true;
}

// ----------------------------------------------------------------------------------------
// the handshake: who may connect

inline SocketHello socket_hello(const SocketComm* c) {
    SocketHello h;
    h.magic = htonl(SOCKET_MAGIC);
    h.version = htonl(SOCKET_VERSION);
    h.world = (int32_t)htonl((uint32_t)c->world);
    h.rank = (int32_t)htonl((uint32_t)c->rank);
    socket_random_bytes(h.nonce, sizeof h.nonce);
    return h;
}

// HMAC(secret, label || NUL || hello || challenge): the proof of one side of one connection.
// Both nonces are in it, so no proof serves twice; the label tells the two sides' proofs apart,
// so a listener's proof cannot be reflected back to it as a connector's.
inline void socket_mac(const SocketComm* c, const char* label, const SocketHello& h,
                       const SocketChallenge& ch, uint8_t out[32]) {
    HmacSha256 m;
    hmac_sha256_init(&m, c->secret.data(), c->secret.size());
    hmac_sha256_update(&m, label, strlen(label) + 1);
    hmac_sha256_update(&m, &h, sizeof h);
    hmac_sha256_update(&m, &ch, sizeof ch);
    hmac_sha256_final(&m, out);
}

// Connector side, on a fresh connection to rank `peer` at `where`: hello, the listener's
// challenge, this rank's proof, then the verdict and the listener's own proof. Returns once the
// listener proved it is rank `peer` of this job; fails with one line otherwise.
inline void socket_handshake_connect(SocketComm* c, int fd, int peer, const std::string& where) {
    SocketHello h = socket_hello(c);
    socket_send1(c, fd, peer, &h, sizeof h);
    SocketChallenge ch;
    socket_recv1(c, fd, peer, &ch, sizeof ch);
    if (ntohl(ch.magic) != SOCKET_MAGIC)
        fail("rank %d: the process at %s is not a gptrain rank (bad handshake); stopping", c->rank,
             where.c_str());
    if (ntohl(ch.version) != SOCKET_VERSION)
        fail("rank %d: rank %d at %s speaks socket protocol version %u, this rank version %d: build every "
             "rank from the same source", c->rank, peer, where.c_str(), ntohl(ch.version), SOCKET_VERSION);
    int their_rank = (int)ntohl((uint32_t)ch.rank), their_world = (int)ntohl((uint32_t)ch.world);
    if (their_rank != peer)
        fail("rank %d: the process at %s says it is rank %d, not rank %d; stopping", c->rank, where.c_str(),
             their_rank, peer);
    SocketProof proof;
    socket_mac(c, "gptrain connector", h, ch, proof.mac);
    socket_send1(c, fd, peer, &proof, sizeof proof);
    SocketVerdict v;
    socket_recv1(c, fd, peer, &v, sizeof v);
    uint32_t status = ntohl(v.status);
    if (status == SOCKET_REFUSED_PROOF)
        fail("rank %d: rank %d at %s refused this rank's proof of the job secret: the ranks do not share "
             "one (set the same %s on every rank, or with -pi fs on none); stopping", c->rank, peer,
             where.c_str(), SOCKET_SECRET_ENV);
    if (status == SOCKET_REFUSED_WORLD)
        fail("rank %d: rank %d at %s refused this rank: its world size is %d, this rank's %d; stopping",
             c->rank, peer, where.c_str(), their_world, c->world);
    if (status != SOCKET_ACCEPTED)
        fail("rank %d: rank %d at %s refused this rank (reason %u); stopping", c->rank, peer, where.c_str(),
             status);
    uint8_t want[32];
    socket_mac(c, "gptrain listener", h, ch, want);
    if (!digest_equal(want, v.mac, sizeof want))
        fail("rank %d: the process at %s, which says it is rank %d, did not prove it knows the job secret: an "
             "impostor, or a rank with another secret; stopping", c->rank, where.c_str(), peer);
}

inline std::string socket_seconds(double s) {
    char text[32];
    snprintf(text, sizeof text, "%g s", s);
    return text;
}

// Listener side: one accepted connection whose handshake is under way.
struct SocketPending {
    int fd = -1;                // -1 once refused
    std::string from;           // "ip:port", for the log
    double until = 0;           // refused if it has not proved itself by then
    SocketChallenge challenge;  // what this listener sent it
    uint8_t in[sizeof(SocketHello) + sizeof(SocketProof)];  // what it sent back so far
    size_t got = 0;
};

// A connection that proved itself a rank of this job.
struct SocketJoined {
    int fd = -1;
    SocketHello hello;
    std::string from;
};

// Closes a connection that did not prove itself, with one line on stderr; status >= 0 first
// tells it why (a rank of this protocol then stops with a message that says so).
inline void socket_refuse(SocketComm* c, SocketPending* p, const char* port_name, int status,
                          const std::string& why) {
    if (status >= 0) {
        SocketVerdict v;
        memset(&v, 0, sizeof v);
        v.status = htonl((uint32_t)status);
        send(p->fd, &v, sizeof v, MSG_NOSIGNAL | MSG_DONTWAIT);  // best effort: it is going anyway
    }
    close(p->fd);
    p->fd = -1;
    c->refused++;
    if (c->refused <= SOCKET_MAX_REFUSAL_LINES)
        fprintf(stderr, "warning: rank %d: refused a connection from %s to its %s port: %s\n", c->rank,
                p->from.c_str(), port_name, why.c_str());
    if (c->refused == SOCKET_MAX_REFUSAL_LINES)
        fprintf(stderr, "warning: rank %d: %d connections refused; the next ones are not logged\n", c->rank,
                c->refused);
}

// A connection just accepted: it gets its challenge at once (a fresh socket's buffer takes it
// whole), and a few seconds to answer.
inline void socket_pending_add(SocketComm* c, int fd, const char* port_name,
                               std::vector<SocketPending>* pending) {
    SocketPending p;
    p.fd = fd;
    p.from = socket_fd_text(fd, false);
    p.until = socket_now() + c->handshake_s;
    p.challenge.magic = htonl(SOCKET_MAGIC);
    p.challenge.version = htonl(SOCKET_VERSION);
    p.challenge.world = (int32_t)htonl((uint32_t)c->world);
    p.challenge.rank = (int32_t)htonl((uint32_t)c->rank);
    socket_random_bytes(p.challenge.nonce, sizeof p.challenge.nonce);
    socket_set_options(fd);
    if (send(fd, &p.challenge, sizeof p.challenge, MSG_NOSIGNAL) != (ssize_t)sizeof p.challenge)
        return socket_refuse(c, &p, port_name, -1,
                             std::string("it closed before the challenge went out (") + strerror(errno) + ")");
    pending->push_back(p);
}

// Reads what a pending connection sent. True once it proved itself a rank of this job; refuses
// it (fd -1) the moment anything is wrong.
inline bool socket_pending_step(SocketComm* c, SocketPending* p, const char* port_name) {
    ssize_t k = recv(p->fd, p->in + p->got, sizeof p->in - p->got, 0);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (k < 0 && errno == ECONNRESET) k = 0;  // it closed while our challenge was on its way
    std::string why;
    int status = -1;  // the verdict it is sent, if any
    SocketHello h;
    memset(&h, 0, sizeof h);
    if (k < 0) why = std::string("reading from it failed (") + strerror(errno) + ")";
    else if (k == 0 && p->got == 0) why = "it closed the connection without a word (a port scan?)";
    else if (k == 0)
        why = "it closed the connection after " + std::to_string(p->got) + " of the " +
              std::to_string(sizeof p->in) + " handshake bytes";
    else {
        p->got += (size_t)k;
        memcpy(&h, p->in, std::min(p->got, sizeof h));
    }
    if (why.empty() && p->got >= 4 && ntohl(h.magic) != SOCKET_MAGIC)
        why = "not a gptrain rank (its first bytes are not gptrain's handshake)";
    else if (why.empty() && p->got >= 8 && ntohl(h.version) != SOCKET_VERSION) {
        status = SOCKET_REFUSED_VERSION;
        why = "it speaks socket protocol version " + std::to_string(ntohl(h.version)) + ", this rank version " +
              std::to_string(SOCKET_VERSION);
    } else if (why.empty() && p->got == sizeof p->in) {
        uint8_t want[32];
        socket_mac(c, "gptrain connector", h, p->challenge, want);
        int world = (int)ntohl((uint32_t)h.world);
        if (!digest_equal(want, p->in + sizeof h, sizeof want)) {
            status = SOCKET_REFUSED_PROOF;
            why = "wrong proof of the job secret (another " + std::string(SOCKET_SECRET_ENV) +
                  " or secret file, or not a rank of this job)";
        } else if (world != c->world) {
            status = SOCKET_REFUSED_WORLD;
            why = "it is rank " + std::to_string((int)ntohl((uint32_t)h.rank)) + " of a world of " +
                  std::to_string(world) + ", this job has " + std::to_string(c->world);
        } else {
            return true;
        }
    }
    if (!why.empty()) socket_refuse(c, p, port_name, status, why);
    return false;
}

// Listener side: accepts connections on listen_fd and runs their handshakes together under one
// poll(), so a slow or silent one holds up no other. Returns the next connection that proved
// itself a rank of this job (it has been sent its verdict and this rank's proof), after refusing
// with a line each one that did not; fd -1 if none did by `until`. Handshakes still under way
// stay in *pending for the next call.
inline SocketJoined socket_accept_rank(SocketComm* c, int listen_fd, const char* port_name, double until,
                                       std::vector<SocketPending>* pending) {
    std::vector<pollfd> fds;
    for (;;) {
        double now = socket_now();
        for (SocketPending& p : *pending)
            if (p.fd >= 0 && now >= p.until)
                socket_refuse(c, &p, port_name, -1,
                              p.got == 0 ? "it sent nothing for " + socket_seconds(c->handshake_s)
                                         : "it sent " + std::to_string(p.got) + " of the " +
                                               std::to_string(sizeof p.in) + " handshake bytes in " +
                                               socket_seconds(c->handshake_s));
        auto refused = [](const SocketPending& p) { return p.fd < 0; };
        pending->erase(std::remove_if(pending->begin(), pending->end(), refused), pending->end());
        if (now >= until) return SocketJoined();
        int ms = socket_poll_ms(until);
        fds.clear();
        for (const SocketPending& p : *pending) {
            fds.push_back({p.fd, POLLIN, 0});
            ms = std::min(ms, socket_poll_ms(p.until));
        }
        bool room = pending->size() < SOCKET_MAX_PENDING;  // else new ones wait in the backlog
        if (room) fds.push_back({listen_fd, POLLIN, 0});
        int rc = poll(fds.data(), fds.size(), ms);
        if (rc < 0 && errno != EINTR) fail("rank %d: poll failed (%s)", c->rank, strerror(errno));
        if (rc <= 0) continue;
        for (size_t i = 0; i < pending->size(); i++) {
            SocketPending& p = (*pending)[i];
            if (fds[i].revents == 0 || !socket_pending_step(c, &p, port_name)) continue;
            SocketJoined j;
            j.fd = p.fd;
            j.from = p.from;
            memcpy(&j.hello, p.in, sizeof j.hello);
            SocketVerdict v;
            v.status = htonl(SOCKET_ACCEPTED);
            socket_mac(c, "gptrain listener", j.hello, p.challenge, v.mac);
            pending->erase(pending->begin() + (ptrdiff_t)i);
            socket_send1(c, j.fd, (int)ntohl((uint32_t)j.hello.rank), &v, sizeof v);
            return j;
        }
        while (room && (fds.back().revents & POLLIN) && pending->size() < SOCKET_MAX_PENDING) {
            int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) socket_pending_add(c, fd, port_name, pending);
            else if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            else if (errno != EINTR && errno != ECONNABORTED)
                fail("rank %d: accept failed (%s)", c->rank, strerror(errno));
        }
    }
}

// The handshakes still under way once every rank a listener waited for has joined.
inline void socket_refuse_pending(SocketComm* c, std::vector<SocketPending>* pending, const char* port_name) {
    for (SocketPending& p : *pending)
        if (p.fd >= 0)
            socket_refuse(c, &p, port_name, -1, "it had not proved itself when every rank had joined");
    pending->clear();
}
