"""Result frames of a batch: header rewrites, multicast replication and IPv4 checksums as arrays."""

from __future__ import annotations

import numpy as np

from ..wire import FrameLayout
from .fields import FrameFields, FrameRecords
from .state import SwitchState


def rewrite_offsets(layout: FrameLayout, fields: FrameFields, records: FrameRecords) -> tuple[int, ...] | None:
    """Byte offsets of the fields a result frame rewrites (Ethernet destination and source, IPv4 source and
    destination, UDP source and destination port), then of the IPv4 header, its length and its checksum;
    None when those fields are not whole units of 6, 6, 4, 4, 2 and 2 bytes (then the batch path cannot
    build result frames as arrays)."""
    f = fields
    units = (f.eth_dst, f.eth_src, f.ip_src, f.ip_dst, f.sport, f.dport)
    if [layout.unit_sizes[i] for i in units] != [6, 6, 4, 4, 2, 2]:
        return None
    return tuple(records.offset(i) for i in units) + (f.ip_off, layout.ipv4_len, f.ck_off)


class BatchEmitter:
    """The result frames of the vectorised batch path, built as byte arrays.

    Interface: :meth:`per_packet` (one output list per packet, as
    ``process_batch`` returns them), :meth:`by_port` and :meth:`by_port_pieces` (one
    byte matrix per egress port, as ``process_matrix`` and ``process_groups``
    return them); the two ways of building multicast replicas,
    :meth:`replicate_one_group` and :meth:`replicate_groups`.  Multicast
    groups and ``result_dst`` entries are read from ``state``; each group's
    arrays are cached until the group or the table changes.  ``rewrite`` is
    :func:`rewrite_offsets`'s (not None).
    """

    def __init__(self, layout: FrameLayout, fields: FrameFields, records: FrameRecords, state: SwitchState,
                 rewrite: tuple[int, ...]):
        L, f = layout, fields
        self._layout = layout
        self._records = records
        self._state = state
        self._groups = state.groups
        self._rw = rewrite
        self._gvec: dict[int, GroupArrays] = {}
        self._omni = f.omni
        self._msg_result = f.msg_result
        self._out_unicast, self._out_multicast = f.out_unicast, f.out_multicast
        self._i_eth_dst, self._i_eth_src, self._i_ip_dst, self._i_ip_src = f.eth_dst, f.eth_src, f.ip_dst, f.ip_src
        self._i_dport, self._i_sport, self._i_exp, self._i_udp_ck = f.dport, f.sport, f.exp, f.udp_ck
        self._i_next, self._i_total_len, self._i_udp_len = f.next, f.total_len, f.udp_len
        self._ip_off, self._ck_off = f.ip_off, f.ck_off
        # byte-level rewrites of msg_type, exponent and UDP checksum, where their units allow (else a record view)
        self._res_bytes = None
        mt, ex = L.slot("agg.msg_type"), L.slot("agg.exponent")
        if (L.unit_sizes[mt.index] == 1 and ex.shift is None and L.unit_sizes[ex.index] in (1, 2, 4)
                and L.unit_sizes[f.udp_ck] == 2):
            self._res_bytes = (records.offset(mt.index), 0xFF & ~(mt.mask << (mt.shift or 0)),
                               f.msg_result << (mt.shift or 0), records.offset(ex.index), L.unit_sizes[ex.index],
                               records.offset(f.udp_ck))

    def per_packet(self, Lg, arr, sel, grow, row, A, E, N, MG, carried, has_carry, gl, ports, results):
        """Result frames of the admitted packets ``sel`` (one length group) as per-packet output lists."""
        X, Lx, uni, mc, rep = self._result_frames(Lg, arr, sel, grow, row, A, E, N, MG, carried, has_carry)
        gsel = sel.tolist()
        if len(uni):
            xblob = X.tobytes()
            for j in uni.tolist():
                k = gsel[j]
                results[gl[k]] = [(ports[gl[k]], xblob[j * Lx:(j + 1) * Lx])]
        if len(mc):
            M, rports, counts, one_group = rep
            nrep = len(rports)
            mblob = M.tobytes()
            # every replica as (port, frame) in one pass, then one list slice per multicast packet
            pairs = list(zip(rports, [mblob[q:q + Lx] for q in range(0, nrep * Lx, Lx)]))
            tgt = [gl[gsel[j]] for j in mc.tolist()]
            if one_group:
                k = counts[0] if counts else 0
                for t, q in zip(tgt, range(0, nrep, k) if k else [0] * len(tgt)):
                    results[t] = pairs[q:q + k]
            else:
                pos = 0
                for t, cnt in zip(tgt, counts):
                    results[t] = pairs[pos:pos + cnt]
                    pos += cnt

    def by_port(self, Lg, arr, sel, row, gidx, A, E, MG, carried, has_carry, ports):
        """Result frames of the admitted packets ``sel`` as one byte matrix per egress port, each in
        batch order (the order of the per-packet outputs of :meth:`per_packet`)."""
        return self.by_port_pieces([(Lg, arr, sel, False)], row, gidx, A, E, None, MG, carried, has_carry, ports)

    def by_port_pieces(self, pieces, row, gidx, A, E, N, MG, carried, has_carry, ports):
        """:meth:`by_port` of several pieces (length group ``Lg`` with its byte matrix ``arr``, its
        admitted packets ``sel``, whether their results grow by the data header), merged per egress
        port in batch order."""
        parts: dict[int, list] = {}            # port -> [(batch indices, frames)]
        for Lg, arr, sel, grow in pieces:
            self._port_parts(parts, Lg, arr, sel, grow, row, gidx, A, E, N, MG, carried, has_carry, ports)
        out = []
        for port, ps in parts.items():
            if len(ps) == 1:
                out.append((port, ps[0][1]))
                continue
            at = np.concatenate([p[0] for p in ps])
            o = np.argsort(at, kind="stable")          # a packet's own frames keep their order too
            if len({p[1].shape[1] for p in ps}) == 1:
                out.append((port, np.concatenate([p[1] for p in ps])[o]))
                continue
            # results of several lengths: runs of one length, in batch order
            rows = [r for p in ps for r in p[1]]
            k = 0
            while k < len(o):
                n = len(rows[o[k]])
                j = k + 1
                while j < len(o) and len(rows[o[j]]) == n:
                    j += 1
                out.append((port, np.stack([rows[i] for i in o[k:j].tolist()])))
                k = j
        return out

    def _port_parts(self, parts, Lg, arr, sel, grow, row, gidx, A, E, N, MG, carried, has_carry, ports):
        X, Lx, uni, mc, rep = self._result_frames(Lg, arr, sel, grow, row, A, E, N, MG, carried, has_carry)
        if len(mc):
            M, rports, counts, one_group = rep
            at = gidx[sel[mc]]
            if one_group and counts and counts[0]:
                k = counts[0]
                M3 = M.reshape(len(mc), k, Lx)
                for j, port in enumerate(rports[:k]):
                    parts.setdefault(port, []).append((at, M3[:, j, :]))
            elif len(rports):
                rp = np.asarray(rports)
                ra = np.repeat(at, counts)
                for port in set(rports):
                    w = rp == port
                    parts.setdefault(port, []).append((ra[w], M[w]))
        if len(uni):
            at = gidx[sel[uni]]
            up = np.asarray(ports)[at]
            for port in set(up.tolist()):
                w = up == port
                parts.setdefault(port, []).append((at[w], X[uni[w]]))

    def _result_frames(self, Lg, arr, sel, grow, row, A, E, N, MG, carried, has_carry):
        """The result frames of packets ``sel``: (their rewritten rows ``X``, their length, the unicast
        and the multicast ones among them (indices into ``sel``), and for the multicast ones (the
        replica matrix, each replica's port, replicas per packet, whether all went to one group)).
        Header rewrites on the whole (k, Lg) array, multicast replication with np.repeat, IPv4
        checksums vectorised."""
        L = self._layout
        src = arr[row[sel]]
        off, vlen = L.values_offset, L.data_bytes
        if grow:
            vb = carried[sel].astype(L.value_dtype).view(np.uint8).reshape(len(sel), vlen)
            X = np.concatenate([src[:, :L.fixed_len], vb, src[:, L.fixed_len:]], axis=1)
        else:
            X = src
            hc = has_carry[sel]
            if carried is not None and hc.all():
                X[:, off:off + vlen] = carried[sel].astype(L.value_dtype).view(np.uint8)
            elif carried is not None and hc.any():
                w = hc.nonzero()[0]
                X[w, off:off + vlen] = carried[sel[w]].astype(L.value_dtype).view(np.uint8)
        Lx = X.shape[1]
        rb = self._res_bytes
        if rb is not None and not self._omni:
            # byte-level rewrites of msg_type, exponent and UDP checksum (cheaper than a record view)
            mo, mk, mv, eo, es, co = rb
            X[:, mo] = (X[:, mo] & mk) | mv
            if es == 1:
                X[:, eo] = E[sel]
            else:
                X[:, eo:eo + es] = E[sel].astype(f">u{es}").view(np.uint8).reshape(-1, es)
            X[:, co:co + 2] = 0
            R = None
        else:
            R = self._rewrite_result_fields(X, Lx, sel, grow, E, N, vlen)
        acts = A[sel]
        if (acts == self._out_multicast).all():
            uni, mc = acts[:0], np.arange(len(sel))
        else:
            uni = (acts == self._out_unicast).nonzero()[0]
            mc = (acts == self._out_multicast).nonzero()[0]
        if len(uni):
            if R is None:
                R = X.view(self._records.dtype(Lx)).reshape(-1)
            U = R[uni]
            for a_, b_ in ((self._i_eth_dst, self._i_eth_src), (self._i_ip_dst, self._i_ip_src),
                           (self._i_dport, self._i_sport)):
                fa, fb = f"u{a_}", f"u{b_}"
                t = U[fa].copy()
                U[fa] = U[fb]
                U[fb] = t
            R[uni] = U
        rep = None
        if len(mc):
            mg_a = MG[sel[mc]]
            mg0 = int(mg_a[0])
            if (mg_a == mg0).all():
                mgs = None
                gs = [self._group_vec(mg0)]
            else:
                mgs = mg_a.tolist()
                gs = [self._group_vec(mg) for mg in set(mgs)]
            one_group = len(gs) == 1 and gs[0].all_rewritten
            if one_group:
                g = gs[0]
                counts = [len(g.ports)] * len(mc)
                rports = g.ports * len(mc)
                M = self.replicate_one_group(X, mc, g)
            else:
                if mgs is None:
                    mgs = [mg0] * len(mc)
                gmap = {mg: self._group_vec(mg) for mg in set(mgs)}
                counts = [len(gmap[mg].ports) for mg in mgs]
                rports = [p for mg in mgs for p in gmap[mg].ports]
                M = self.replicate_groups(X, mc, [gmap[mg] for mg in mgs], counts)
            rep = (M, rports, counts, one_group)
        if len(uni):
            self._checksums(X, uni)
        return X, Lx, uni, mc, rep

    def _rewrite_result_fields(self, X, Lx, sel, grow, E, N, vlen):
        """The result header fields of every row of ``X``, through a record view (returned): msg_type (and
        OmniReduce's flags, next offset and grown lengths), exponent, UDP checksum 0."""
        R = X.view(self._records.dtype(Lx)).reshape(-1)
        mt = self._layout.slot("agg.msg_type")
        u = R[f"u{mt.index}"]
        if self._omni:
            fl = self._layout.slot("agg.flags")
            keep = 0xFF & ~((mt.mask << mt.shift) | (fl.mask << fl.shift))
            R[f"u{mt.index}"] = (u & keep) | (self._msg_result << mt.shift) | (1 << fl.shift)
            R[f"u{self._i_next}"] = N[sel]
            if grow:
                R[f"u{self._i_total_len}"] = (R[f"u{self._i_total_len}"].astype(np.int64) + vlen) & 0xFFFF
                R[f"u{self._i_udp_len}"] = (R[f"u{self._i_udp_len}"].astype(np.int64) + vlen) & 0xFFFF
        else:
            R[f"u{mt.index}"] = (u & (0xFF & ~(mt.mask << mt.shift))) | (self._msg_result << mt.shift)
        R[f"u{self._i_exp}"] = E[sel]
        R[f"u{self._i_udp_ck}"] = 0
        return R

    def _group_vec(self, mgid: int) -> "GroupArrays":
        """Multicast group ``mgid`` as arrays for :meth:`per_packet`; rebuilt when the group or the
        result_dst table has been replaced since the last call."""
        reps = self._groups.get(mgid, ())
        version = self._state.version["result_dst"]
        hit = self._gvec.get(mgid)
        if hit is not None and hit.reps is reps and hit.rdst_version == version:
            return hit
        g = GroupArrays(reps, self._state.result_dst, version)
        self._gvec[mgid] = g
        return g

    def replicate_one_group(self, X, mc, g: "GroupArrays") -> np.ndarray:
        """The replicas of rows ``mc`` of ``X``, all to group ``g`` whose every replica has a
        result_dst: the shared rewrites and the checksum's shared part once per row, then the
        per-replica fields and checksums broadcast over (rows, replicas)."""
        q, k = len(mc), len(g.ports)
        if not k:
            return X[:0]
        ed, es, isr, ids, sp, dp, o, n, ck = self._rw
        S = X if q == len(X) else X[mc]           # X is the batch's own copy: rewrite it in place
        S[:, es:es + 6] = S[:, ed:ed + 6]
        S[:, isr:isr + 4] = S[:, ids:ids + 4]
        S[:, sp:sp + 2] = S[:, dp:dp + 2]
        S[:, ids:ids + 4] = 0
        S[:, ck:ck + 2] = 0
        part = S[:, o:o + n].view(">u2").sum(axis=1, dtype=np.int64)
        M = np.repeat(S, k, axis=0)
        M3 = M.reshape(q, k, -1)
        M3[:, :, ed:ed + 6] = g.mac
        M3[:, :, ids:ids + 4] = g.ip
        M3[:, :, dp:dp + 2] = g.dport
        c = part[:, None] + g.dsum
        c = (c & 0xFFFF) + (c >> 16)
        c = (c & 0xFFFF) + (c >> 16)
        M3[:, :, ck:ck + 2] = (~c & 0xFFFF).astype(">u2").view(np.uint8).reshape(q, k, 2)
        return M

    def replicate_groups(self, X, mc, gs: list, counts: list[int]) -> np.ndarray:
        """The replicas of rows ``mc`` of ``X``, row i to group ``gs[i]`` (``counts[i]`` replicas);
        a replica whose rid has no result_dst keeps the packet's addresses."""
        if not sum(counts):
            return X[:0]
        ed, es, isr, ids, sp, dp, _o, _n, _ck = self._rw
        M = X[np.repeat(mc, counts)]
        w = np.concatenate([g.has for g in gs]).nonzero()[0]
        if len(w):
            sub = M[w]
            sub[:, es:es + 6] = sub[:, ed:ed + 6]
            sub[:, isr:isr + 4] = sub[:, ids:ids + 4]
            sub[:, sp:sp + 2] = sub[:, dp:dp + 2]
            sub[:, ed:ed + 6] = np.concatenate([g.mac for g in gs])[w]
            sub[:, ids:ids + 4] = np.concatenate([g.ip for g in gs])[w]
            sub[:, dp:dp + 2] = np.concatenate([g.dport for g in gs])[w]
            M[w] = sub
        self._checksums(M)
        return M

    def _checksums(self, X, rows=None) -> None:
        """Recompute the IPv4 header checksum of every row of the (k, L) byte array ``X`` (or of ``rows``)."""
        o, n, c = self._ip_off, self._layout.ipv4_len, self._ck_off
        H = X[:, o:o + n] if rows is None else X[rows, o:o + n]
        H = np.ascontiguousarray(H)
        H[:, c - o:c - o + 2] = 0
        s = H.view(">u2").sum(axis=1, dtype=np.uint32)
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        ck = (~s & 0xFFFF).astype(">u2").view(np.uint8).reshape(-1, 2)
        if rows is None:
            X[:, c:c + 2] = ck
        else:
            X[rows, c:c + 2] = ck


class GroupArrays:
    """One multicast group as arrays: replica ports, and per replica whether its rid has a
    result_dst and that destination's MAC, IPv4 address and UDP port as big-endian bytes
    (zeros where it has none) plus the address's two 16-bit words summed (for checksums).  ``reps`` and
    ``rdst_version``: the replica list and the result_dst table version they were built from."""

    __slots__ = ("reps", "rdst_version", "ports", "has", "all_rewritten", "mac", "ip", "dport", "dsum")

    def __init__(self, reps, rdst, rdst_version: int):
        self.reps, self.rdst_version = reps, rdst_version
        self.ports = [p for p, _r in reps]
        dsts = [rdst.get(rid) if rid else None for _p, rid in reps]
        self.has = np.array([d is not None for d in dsts], dtype=bool)
        self.all_rewritten = bool(self.has.all())
        k = len(dsts)
        self.mac = np.frombuffer(b"".join(d[0] if d else bytes(6) for d in dsts), np.uint8).reshape(k, 6)
        ips = np.array([d[1] if d else 0 for d in dsts], dtype=np.int64)
        self.ip = ips.astype(">u4").view(np.uint8).reshape(k, 4)
        self.dport = np.array([d[2] if d else 0 for d in dsts], dtype=">u2").view(np.uint8).reshape(k, 2)
        self.dsum = (ips >> 16) + (ips & 0xFFFF)
