// nccl_p2p.cpp: ncclSend and ncclRecv for the emulated NCCL (llmc/emu/include/nccl.h says
// what they promise), run by nccl.cpp's stream operations.
//
// Each ordered pair of ranks (sender s, receiver r, s != r) has a channel in the segment: a
// Channel and a ring of two slots of CommState::p2p_slot bytes. The k-th send from s to r
// matches the k-th receive on r from s, counted per pair and direction (NCCL matches
// point-to-point operations in the order they were issued):
//   1. each side writes its description {k, count, type} to Channel::send[k % 2] or
//      recv[k % 2] without waiting, then waits for the other side's and compares: a mismatch
//      fails both sides with ncclInvalidUsage before any data moves. So a send does not
//      complete before its receive is posted (NCCL does not promise more: code that needs
//      a send to finish first deadlocks on a GPU too, sooner or later; here at once, and the
//      wait's timeout says so);
//   2. the sender copies the message into the slots piece by piece (the last one may be
//      short), each piece once the receiver took the one two pieces before, and the
//      receiver copies them out. Channel::sent and taken count pieces over all the pair's
//      messages, so the ring needs no reset between messages.
// Two description slots suffice: a side writes description k + 2 only after its message
// k + 1 completed, which needed the other side's description k + 1, which that side wrote
// only after its message k completed, that is after it read description k.
//
// A batch, one stream operation, is a group's sends and receives on one communicator and
// stream, or one ungrouped call. It advances all of its operations in turns and never blocks
// on one, so they progress together as a group's do in NCCL; operations with the same peer
// in the same direction run one after another, in the order issued. Sends to self are
// copied to the batch's receives from self, matched in the order issued.
#include <string.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "nccl_internal.h"  // defines: CommState, Channel, Coll, Wait, report

namespace emu_nccl {
namespace {

// one send or receive of a batch, with a peer other than this rank, while it runs
struct P2pOp {
    const Coll* a;
    bool send;
    uint64_t msg;           // its number in the pair's direction, from 1
    size_t bytes, pieces;   // the message, and the pieces it goes in
    size_t done = 0;        // pieces copied so far
    bool posted = false;    // its description written
    bool matched = false;   // the other side's description read, and the same
    bool finished() const { return matched && done == pieces; }
};

ncclResult_t mismatch(const CommState* c, const Coll& a, uint64_t msg, uint64_t their_count, int32_t their_type) {
    const bool send = a.kind == COLL_SEND;
    report(c->rank, c->nranks,
           "%s #%llu %s rank %d does not match: count %llu of %s here, but rank %d's %s #%llu has count %llu of %s",
           coll_name(a.kind), (unsigned long long)msg, send ? "to" : "from", a.root, (unsigned long long)a.count,
           type_name(a.type), a.root, send ? "ncclRecv" : "ncclSend", (unsigned long long)msg,
           (unsigned long long)their_count, type_name(their_type));
    return ncclInvalidUsage;
}

// Copies each send to self to the receive from self of the same rank in the batch.
ncclResult_t run_self(const CommState* c, const std::vector<Coll>& ops) {
    std::vector<const Coll*> sends, recvs;
    for (const Coll& a : ops)
        if (a.root == c->rank) (a.kind == COLL_SEND ? sends : recvs).push_back(&a);
    if (sends.size() != recvs.size()) {
        // NCCL would wait for the missing partner for ever
        report(c->rank, c->nranks,
               "%zu ncclSend to this rank itself and %zu ncclRecv from it in one group: each needs its "
               "partner in the same group",
               sends.size(), recvs.size());
        return ncclInvalidUsage;
    }
    for (size_t i = 0; i < sends.size(); i++) {
        const Coll& s = *sends[i];
        const Coll& r = *recvs[i];
        if (s.count != r.count || s.type != r.type) return mismatch(c, r, i + 1, s.count, s.type);
        const size_t bytes = s.count * type_size(s.type);
        if (bytes > 0 && s.send != r.recv) memmove(r.recv, s.send, bytes);
    }
    return ncclSuccess;
}

struct Batch {
    CommState* c;
    std::vector<P2pOp> ops;
    ncclResult_t err = ncclSuccess;

    // Moves o on as far as it goes without waiting; true if anything moved.
    bool step(P2pOp& o) {
        const int me = c->rank, peer = o.a->root;
        Channel* ch = o.send ? c->channel(me, peer) : c->channel(peer, me);
        P2pDesc& mine = (o.send ? ch->send : ch->recv)[o.msg & 1];
        const P2pDesc& theirs = (o.send ? ch->recv : ch->send)[o.msg & 1];
        bool moved = false;
        if (!o.posted) {
            mine.count = o.a->count;
            mine.type = o.a->type;
            store_rel(&mine.seq, o.msg);
            o.posted = moved = true;
        }
        if (!o.matched) {
            if (load_acq(&theirs.seq) != o.msg) return moved;
            if (theirs.count != o.a->count || theirs.type != o.a->type) {
                err = mismatch(c, *o.a, o.msg, theirs.count, theirs.type);
                return moved;
            }
            o.matched = moved = true;
        }
        for (; o.done < o.pieces; o.done++, moved = true) {
            const size_t at = o.done * c->p2p_slot, n = std::min(c->p2p_slot, o.bytes - at);
            if (o.send) {
                const uint64_t sent = ch->sent;  // written only here
                if (sent - load_acq(&ch->taken) == 2) break;  // both slots still hold pieces
                memcpy(c->slot(me, peer, sent), (const char*)o.a->send + at, n);
                store_rel(&ch->sent, sent + 1);
            } else {
                const uint64_t taken = ch->taken;  // written only here
                if (load_acq(&ch->sent) == taken) break;  // the next piece is not there yet
                memcpy((char*)o.a->recv + at, c->slot(peer, me, taken), n);
                store_rel(&ch->taken, taken + 1);
            }
        }
        return moved;
    }

    // Moves on the operations with peer j: in each direction the first unfinished one.
    bool advance(int j) {
        bool moved = false, lane_taken[2] = {false, false};
        for (P2pOp& o : ops) {
            if (o.a->root != j || o.finished() || lane_taken[o.send]) continue;
            lane_taken[o.send] = true;
            moved |= step(o);
        }
        return moved;
    }

    bool unfinished_with(int j) const {
        for (const P2pOp& o : ops)
            if (o.a->root == j && !o.finished()) return true;
        return false;
    }
};

}  // namespace

ncclResult_t run_p2p(CommState* c, const std::vector<Coll>& ops) {
    if (ncclResult_t r = run_self(c, ops)) return r;
    Batch b{c, {}};
    std::vector<int> peers;  // each once, in the order first issued
    for (const Coll& a : ops) {
        if (a.root == c->rank) continue;
        const bool send = a.kind == COLL_SEND;
        P2pOp o{&a, send, ++(send ? c->sends : c->recvs)[a.root], a.count * type_size(a.type), 0};
        o.pieces = (o.bytes + c->p2p_slot - 1) / c->p2p_slot;
        b.ops.push_back(o);
        if (std::find(peers.begin(), peers.end(), a.root) == peers.end()) peers.push_back(a.root);
    }
    if (b.ops.empty()) return ncclSuccess;

    char what[96];  // for the wait's messages
    const P2pOp& first = b.ops[0];
    if (b.ops.size() == 1)
        snprintf(what, sizeof(what), "%s #%llu %s rank %d", coll_name(first.a->kind), (unsigned long long)first.msg,
                 first.send ? "to" : "from", first.a->root);
    else
        snprintf(what, sizeof(what), "a group of %zu ncclSend/ncclRecv", b.ops.size());
    Wait w(c, what, clock_s(), c->coll_timeout_s);
    for (;;) {
        const uint32_t p = w.poison();
        bool moved = false;
        for (int j : peers) moved |= b.advance(j);
        if (b.err != ncclSuccess) return b.err;
        int waiting_for = -1;
        for (const P2pOp& o : b.ops)
            if (!o.finished()) {
                waiting_for = o.a->root;
                break;
            }
        if (waiting_for < 0) return ncclSuccess;
        if (moved) {
            w.progressed();
            continue;
        }
        // a peer that exits right after it took part is no reason to fail: look once more
        ncclResult_t r = w.pause(p, waiting_for, [&b](int j) {
            b.advance(j);
            return b.err == ncclSuccess && b.unfinished_with(j);
        });
        if (r != ncclSuccess) return r;
    }
}

}  // namespace emu_nccl
