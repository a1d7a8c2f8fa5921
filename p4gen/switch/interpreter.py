"""The per-packet interpreter: one frame in, the frames out.

:class:`PacketInterpreter` parses a frame with the plan's header layout,
forwards other traffic (``l2_forward`` or flooding), admits aggregation
packets (parser, workers table, slot range), runs the decision
(``_decide_fast`` or ``_decide_reference``, from :mod:`.decider`) and builds
the result frames (msg_type, exponent, values, checksums; multicast with
per-replica ``result_dst`` rewrites).
"""

from __future__ import annotations

import operator
import struct

from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP
from .state import ModelError


class PacketInterpreter:
    """``process``: parse, admit, decide and emit one frame (a mixin of :class:`SwitchModel`)."""

    # ------------------------------------------------------------------ fields
    def _init_fields(self) -> None:
        L = self.layout
        S = L.slot
        def idx(name: str, whole: bool = True) -> int:
            s = S(name)
            if whole and (s.shift is not None):
                raise ModelError(f"header field {name} is not a whole struct unit")
            return s.index
        self._i_eth_dst = idx("ethernet.dst_addr")
        self._i_eth_src = idx("ethernet.src_addr")
        self._i_etype = idx("ethernet.ether_type")
        self._i_proto = idx("ipv4.protocol")
        self._i_ip_src = idx("ipv4.src_addr")
        self._i_ip_dst = idx("ipv4.dst_addr")
        self._i_sport = idx("udp.src_port")
        self._i_dport = idx("udp.dst_port")
        self._i_udp_ck = idx("udp.checksum")
        self._i_ip_ck = idx("ipv4.hdr_checksum")
        self._i_tsi = idx("agg.tsi")
        self._i_pool = idx("agg.pool_index")
        self._i_exp = idx("agg.exponent")
        s = S("ipv4.ihl")
        self._ihl = (s.index, s.shift or 0, s.mask)
        s = S("agg.msg_type")
        self._msg = (s.index, s.shift or 0, s.mask)
        s = S("agg.job")
        self._job = (s.index, s.shift or 0, s.mask)
        self._set_msg = L.setter("agg.msg_type")
        # OmniReduce: the data header follows agg only when agg.flags bit 0 is set; agg.next carries
        # the worker's next non-zero block offset; a header-only packet that returns values grows
        self._omni = L.omni
        if self._omni:
            s = S("agg.flags")
            self._flags = (s.index, s.shift or 0, s.mask)
            self._set_flags = L.setter("agg.flags")
            self._i_next = idx("agg.next")
            self._i_total_len = idx("ipv4.total_len")
            self._i_udp_len = idx("udp.length")
            self._data_bytes = L.frame_len - L.values_offset
        # workers key: plan key order -> internal order (ingress port first, then unpacked fields)
        wt = self._tables["workers"]
        internal = []
        for k in wt.keys:
            internal.append(-1 if k.field == "ingress_port" else S(k.field).index)
        if internal.count(-1) != 1 or len(set(internal)) != len(internal):
            raise ModelError("workers table must key on ingress_port once and on distinct header fields")
        plan_order = list(range(len(internal)))
        port_pos = internal.index(-1)
        hdr_pos = [i for i in plan_order if i != port_pos]
        self._wkey_order = [port_pos] + hdr_pos
        self._wkey_fields = [internal[i] for i in hdr_pos]
        self._wkey_sub = [S(wt.keys[i].field) for i in hdr_pos]
        whole = all(x.shift is None and not x.raw for x in self._wkey_sub) and self._wkey_sub
        if whole and len(self._wkey_sub) > 1:
            self._wkey_get = operator.itemgetter(*(x.index for x in self._wkey_sub))
        elif whole:
            idx0 = self._wkey_sub[0].index
            self._wkey_get = lambda u: (u[idx0],)
        else:
            self._wkey_get = None
        self._ck = struct.Struct(f">{L.ipv4_len // 2}H")
        self._ck_off = L.ipv4_checksum_offset
        self._ip_off = L.ipv4_offset
        self._ip_end = L.ipv4_offset + L.ipv4_len
        slot_bits = self.params.slot_bits
        self._slot_mask = (1 << slot_bits) - 1
        self._slot_bits = slot_bits
        self._msg_contrib = self.params.msg_contribution
        self._msg_result = self.params.msg_result
        self._flood_base = self.params.flood_group_base
        self._out_drop = self.codes.outcome("drop")
        self._out_unicast = self.codes.outcome("unicast")
        self._out_multicast = self.codes.outcome("multicast")

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
        L = self.layout
        n = len(frame)
        if n < L.fixed_len:
            return self._process_short(frame, ingress_port)
        u = L.struct.unpack_from(frame)
        ihl_i, ihl_s, ihl_m = self._ihl
        if (u[self._i_etype] != ETHERTYPE_IPV4 or (u[ihl_i] >> ihl_s) & ihl_m != 5
                or u[self._i_proto] != IPPROTO_UDP or not L.udp_port_min <= u[self._i_dport] <= L.udp_port_max):
            return self._forward_l2(frame, ingress_port, u[self._i_eth_dst])
        return self._agg(frame, ingress_port, u)

    def _count(self, stat: int, nbytes: int) -> None:
        self._pk[stat] += 1
        self._by[stat] += nbytes

    def _process_short(self, frame, port: int) -> list[tuple[int, bytes]]:
        """Frames shorter than the fixed headers: L2 traffic, or a truncated (malformed) packet."""
        L = self.layout
        n = len(frame)
        mal = self._stat["drop_malformed"]
        eth = L.headers["ethernet"]
        if n < eth.nbytes:
            self._count(mal, n)
            return []
        e = eth.decode(frame)
        if e["ether_type"] != ETHERTYPE_IPV4:
            return self._forward_l2(frame, port, bytes(frame[:6]))
        iph = L.headers["ipv4"]
        if n < iph.offset + iph.nbytes:
            self._count(mal, n)
            return []
        ipf = iph.decode(frame)
        if ipf["ihl"] != 5 or ipf["protocol"] != IPPROTO_UDP:
            return self._forward_l2(frame, port, bytes(frame[:6]))
        uh = L.headers["udp"]
        if n < uh.offset + uh.nbytes:
            self._count(mal, n)
            return []
        if not L.udp_port_min <= uh.decode(frame)["dst_port"] <= L.udp_port_max:
            return self._forward_l2(frame, port, bytes(frame[:6]))
        self._count(mal, n)
        return []

    def _forward_l2(self, frame, port: int, dst: bytes) -> list[tuple[int, bytes]]:
        n = len(frame)
        out = self._l2.get(dst, None)
        frame = bytes(frame)
        if out is not None:
            self._count(self._stat["l2_unicast"], n)
            return [(out, frame)]
        self._count(self._stat["l2_flood"], n)
        return [(p, frame) for p, _rid in self.groups.get(self._flood_base + port, ())]

    def _admit(self, frame, port: int, u: tuple):
        """Parser / workers table / slot range checks.  None (counted, dropped) or the worker's context."""
        n = len(frame)
        mi, ms, mm = self._msg
        data = 1
        if self._omni:
            fi, fs, fm = self._flags
            data = (u[fi] >> fs) & 1
        if n < (self.layout.frame_len if data else self.layout.fixed_len) or (u[mi] >> ms) & mm != self._msg_contrib:
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
        ctx = self._admit(frame, port, u)
        if ctx is None:
            return []
        sc, slot, copy, word, mask, nw, mgid, data, bound = ctx
        decide = self._decide_fast if self.fast else self._decide_reference
        nxt = u[self._i_next] if self._omni else 0
        action, stat, exp_out, vals_out, nxt_out = decide(frame, sc, slot, copy, word, mask, nw, u[self._i_tsi],
                                                          u[self._i_exp], data, nxt, None, bound)
        self._count(stat, len(frame))
        if action == self._out_drop:
            return []
        L = self.layout
        payload = None if vals_out is None else vals_out.astype(L.value_dtype).tobytes()
        return self._emit(frame, port, u, action, exp_out, payload, mgid, data, nxt_out)

    def _emit(self, frame, port: int, u: tuple, action: int, exp_out: int, payload: bytes | None, mgid: int,
              data: int = 1, nxt_out: int = 0):
        """The result frames of one packet: msg_type, exponent, values set, UDP checksum 0, IPv4 checksum fixed.

        OmniReduce results also carry flags = 1 and the slot's next offset; a
        header-only packet that returns values grows by the data header.
        """
        L = self.layout
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
        for eport, rid in self.groups.get(mgid, ()):
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
