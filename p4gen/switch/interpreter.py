"""The per-packet path: one frame in, the frames out.

:class:`PacketPath` parses a frame with the plan's header layout, forwards
other traffic (``l2_forward`` or flooding), admits aggregation packets
(parser, workers table, slot range), runs the decision of a
:class:`.DecisionProgram` (compiled or by reference) and builds the result
frames (msg_type, exponent, values, checksums; multicast with per-replica
``result_dst`` rewrites).  It reads and updates a :class:`.SwitchState`.
"""

from __future__ import annotations

from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP, FrameLayout
from .decider import DecisionProgram
from .fields import FrameFields
from .state import SwitchState


class PacketPath:
    """One frame at a time: :meth:`process`.

    The steps of :meth:`process` are public for the batch path, which runs
    them frame by frame where it cannot vectorise: :meth:`short` (a frame
    shorter than the fixed headers), :meth:`forward_l2` (other traffic),
    :meth:`admit` (an aggregation packet's checks and its worker's context)
    and :meth:`emit` (the result frames of a decided packet).  ``fast``:
    decide with the compiled :attr:`DecisionProgram.decide`, else with
    :meth:`DecisionProgram.decide_reference`.

    What the per-packet code reads is bound to this object's own attributes
    at construction (the state's registers, tables and counters are only
    changed in place), so a frame costs no look-up through another object.
    """

    def __init__(self, layout: FrameLayout, fields: FrameFields, state: SwitchState, program: DecisionProgram,
                 fast: bool = True):
        f = fields
        self._layout = layout
        self._decide = program.decide if fast else program.decide_reference
        # the state, bound once
        self._pk, self._by = state.stat_packets, state.stat_bytes
        self._stat = state.stat_index
        # agg_rx (every accepted aggregation packet) is counted only by plans whose counter has it
        self._agg_rx = state.stat_index.get("agg_rx")
        self._workers, self._l2, self._rdst, self._groups = state.workers, state.l2, state.result_dst, state.groups
        # the header fields
        self._i_eth_dst, self._i_eth_src, self._i_etype, self._i_proto = f.eth_dst, f.eth_src, f.etype, f.proto
        self._i_ip_src, self._i_ip_dst, self._i_sport, self._i_dport = f.ip_src, f.ip_dst, f.sport, f.dport
        self._i_udp_ck, self._i_ip_ck, self._i_tsi, self._i_pool, self._i_exp = (f.udp_ck, f.ip_ck, f.tsi, f.pool,
                                                                                f.exp)
        self._ihl, self._msg, self._set_msg = f.ihl, f.msg, f.set_msg
        self._omni = f.omni
        self._flags, self._set_flags, self._i_next = f.flags, f.set_flags, f.next
        self._i_total_len, self._i_udp_len, self._data_bytes = f.total_len, f.udp_len, f.data_bytes
        self._wkey_sub, self._wkey_get = f.worker_key, f.worker_key_get
        self._ck, self._ck_off, self._ip_off = f.ck_words, f.ck_off, f.ip_off
        self._slot_mask, self._slot_bits = f.slot_mask, f.slot_bits
        self._msg_contrib, self._msg_result, self._flood_base = f.msg_contrib, f.msg_result, f.flood_base
        self._out_drop, self._out_unicast, self._out_multicast = f.out_drop, f.out_unicast, f.out_multicast

    def _worker_key(self, u, port: int) -> tuple:
        getter = self._wkey_get
        if getter is not None:                      # every key field is a whole struct unit
            return (port, *getter(u))
        key = [port]
        for s in self._wkey_sub:
            v = u[s.index]
            if s.raw:
                v = int.from_bytes(v, "big")
            key.append(v if s.shift is None else (v >> s.shift) & s.mask)
        return tuple(key)

    # ------------------------------------------------------------------ packets
    def process(self, frame: bytes, ingress_port: int) -> list[tuple[int, bytes]]:
        """One frame in on ``ingress_port``; the frames out as (egress_port, bytes)."""
        L = self._layout
        n = len(frame)
        if n < L.fixed_len:
            return self.short(frame, ingress_port)
        u = L.struct.unpack_from(frame)
        ihl_i, ihl_s, ihl_m = self._ihl
        if (u[self._i_etype] != ETHERTYPE_IPV4 or (u[ihl_i] >> ihl_s) & ihl_m != 5
                or u[self._i_proto] != IPPROTO_UDP or not L.udp_port_min <= u[self._i_dport] <= L.udp_port_max):
            return self.forward_l2(frame, ingress_port, u[self._i_eth_dst])
        return self._agg(frame, ingress_port, u)

    def _count(self, stat: int, nbytes: int) -> None:
        self._pk[stat] += 1
        self._by[stat] += nbytes

    def short(self, frame, port: int) -> list[tuple[int, bytes]]:
        """Frames shorter than the fixed headers: L2 traffic, or a truncated (malformed) packet."""
        L = self._layout
        n = len(frame)
        mal = self._stat["drop_malformed"]
        eth = L.headers["ethernet"]
        if n < eth.nbytes:
            self._count(mal, n)
            return []
        e = eth.decode(frame)
        if e["ether_type"] != ETHERTYPE_IPV4:
            return self.forward_l2(frame, port, bytes(frame[:6]))
        iph = L.headers["ipv4"]
        if n < iph.offset + iph.nbytes:
            self._count(mal, n)
            return []
        ipf = iph.decode(frame)
        if ipf["ihl"] != 5 or ipf["protocol"] != IPPROTO_UDP:
            return self.forward_l2(frame, port, bytes(frame[:6]))
        uh = L.headers["udp"]
        if n < uh.offset + uh.nbytes:
            self._count(mal, n)
            return []
        if not L.udp_port_min <= uh.decode(frame)["dst_port"] <= L.udp_port_max:
            return self.forward_l2(frame, port, bytes(frame[:6]))
        self._count(mal, n)
        return []

    def forward_l2(self, frame, port: int, dst: bytes) -> list[tuple[int, bytes]]:
        """Other traffic: unicast to the ``l2_forward`` entry of ``dst`` (destination MAC bytes), else flooded
        to the ingress port's flood group."""
        n = len(frame)
        out = self._l2.get(dst, None)
        frame = bytes(frame)
        if out is not None:
            self._count(self._stat["l2_unicast"], n)
            return [(out, frame)]
        self._count(self._stat["l2_flood"], n)
        return [(p, frame) for p, _rid in self._groups.get(self._flood_base + port, ())]

    def admit(self, frame, port: int, u: tuple):
        """Parser / workers table / slot range checks of a frame (``u``: its unpacked headers).  None (counted,
        dropped) or the worker's context: (slot_copy, slot, copy, word, mask, workers, mgid, data, bound)."""
        n = len(frame)
        mi, ms, mm = self._msg
        data = 1
        if self._omni:
            fi, fs, fm = self._flags
            data = (u[fi] >> fs) & 1
        if n < (self._layout.frame_len if data else self._layout.fixed_len) or (u[mi] >> ms) & mm != self._msg_contrib:
            self._count(self._stat["drop_malformed"], n)
            return None
        w = self._workers.get(self._worker_key(u, port))
        if w is None:
            self._count(self._stat["drop_unknown"], n)
            return None
        _wid, word, mask, nw, slot_base, slot_count, mgid = w
        pool = u[self._i_pool]
        sij = pool & self._slot_mask
        if sij >= slot_count:
            self._count(self._stat["drop_bad_slot"], n)
            return None
        copy = (pool >> self._slot_bits) & 1
        slot = (slot_base + sij) & 0xFFFF
        if self._agg_rx is not None:
            self._count(self._agg_rx, n)
        return (slot << 1) | copy, slot, copy, word, mask, nw, mgid, data, 2 * slot_count

    def _agg(self, frame, port: int, u: tuple) -> list[tuple[int, bytes]]:
        ctx = self.admit(frame, port, u)
        if ctx is None:
            return []
        sc, slot, copy, word, mask, nw, mgid, data, bound = ctx
        nxt = u[self._i_next] if self._omni else 0
        action, stat, exp_out, vals_out, nxt_out = self._decide(frame, sc, slot, copy, word, mask, nw, u[self._i_tsi],
                                                          u[self._i_exp], data, nxt, None, bound)
        self._count(stat, len(frame))
        if action == self._out_drop:
            return []
        L = self._layout
        payload = None if vals_out is None else vals_out.astype(L.value_dtype).tobytes()
        return self.emit(frame, port, u, action, exp_out, payload, mgid, data, nxt_out)

    def emit(self, frame, port: int, u: tuple, action: int, exp_out: int, payload: bytes | None, mgid: int,
             data: int = 1, nxt_out: int = 0) -> list[tuple[int, bytes]]:
        """The result frames of one packet: msg_type, exponent, values set, UDP checksum 0, IPv4 checksum fixed.

        OmniReduce results also carry flags = 1 and the slot's next offset; a
        header-only packet that returns values grows by the data header.
        """
        L = self._layout
        pack = L.struct.pack
        vals = list(u)
        self._set_msg(vals, self._msg_result)
        vals[self._i_exp] = exp_out
        vals[self._i_udp_ck] = 0
        ck = self._i_ip_ck
        vals[ck] = 0
        if self._omni:
            self._set_flags(vals, 1)
            vals[self._i_next] = nxt_out
            if not data and payload is not None:
                grow = self._data_bytes
                vals[self._i_total_len] = (vals[self._i_total_len] + grow) & 0xFFFF
                vals[self._i_udp_len] = (vals[self._i_udp_len] + grow) & 0xFFFF
                body = payload + bytes(frame[L.fixed_len:])
            elif payload is None:
                body = bytes(frame[L.fixed_len:])
            else:
                body = bytes(frame[L.fixed_len:L.values_offset]) + payload + bytes(frame[L.frame_len:])
        elif payload is None:
            body = bytes(frame[L.fixed_len:])
        else:
            body = bytes(frame[L.fixed_len:L.values_offset]) + payload + bytes(frame[L.frame_len:])
        if action == self._out_unicast:
            vals[self._i_eth_dst], vals[self._i_eth_src] = u[self._i_eth_src], u[self._i_eth_dst]
            vals[self._i_ip_dst], vals[self._i_ip_src] = u[self._i_ip_src], u[self._i_ip_dst]
            vals[self._i_dport], vals[self._i_sport] = u[self._i_sport], u[self._i_dport]
            vals[ck] = self._checksum(pack(*vals))
            return [(port, pack(*vals) + body)]
        out = []
        rdst = self._rdst
        plain = None
        mv = None
        partial = 0
        i_ip_dst = self._i_ip_dst
        for eport, rid in self._groups.get(mgid, ()):
            r = rdst.get(rid) if rid else None
            if r is None:
                if plain is None:
                    p = list(vals)
                    p[ck] = self._checksum(pack(*p))
                    plain = pack(*p) + body
                out.append((eport, plain))
                continue
            if mv is None:
                # fields every rewritten replica shares; the checksum is finished per destination address
                mv = list(vals)
                mv[self._i_eth_src] = u[self._i_eth_dst]
                mv[self._i_ip_src] = u[self._i_ip_dst]
                mv[self._i_sport] = u[self._i_dport]
                mv[i_ip_dst] = 0
                partial = sum(self._ck.unpack_from(pack(*mv), self._ip_off))
            mv[self._i_eth_dst] = r[0]
            mv[i_ip_dst] = r[1]
            mv[self._i_dport] = r[2]
            c = partial + (r[1] >> 16) + (r[1] & 0xFFFF)
            c = (c & 0xFFFF) + (c >> 16)
            c = (c & 0xFFFF) + (c >> 16)
            mv[ck] = ~c & 0xFFFF
            out.append((eport, pack(*mv) + body))
            mv[ck] = 0
        return out

    def _checksum(self, head: bytes) -> int:
        """IPv4 header checksum of a packed header whose checksum field is zero."""
        c = sum(self._ck.unpack_from(head, self._ip_off))
        c = (c & 0xFFFF) + (c >> 16)
        c = (c & 0xFFFF) + (c >> 16)
        return ~c & 0xFFFF
