"""The batch executor: ``process_batch``, vectorised over a batch of frames.

:class:`BatchExecutor` admits a whole batch with numpy (length groups,
header signature or per-field checks, the workers look-up of
:mod:`.batch_workers`), runs the generated decision loop of
:mod:`.decider` once over the batch, applies the value-register operations
at once (:mod:`.batch_values`) and builds the result frames
(:mod:`.batch_emit`).  Outputs, counters and registers are those of
processing the frames one at a time.
"""

from __future__ import annotations

import numpy as np

from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP
from .batch_emit import GroupArrays

# batches at least this long take the vectorised path; shorter ones run frame by frame, which is
# faster there: a vectorised call has a fixed cost of some hundreds of us (its numpy calls), while
# ``process`` costs the same per frame whatever the batch (bench/model.py prints both)
VEC_MIN_BATCH = 32


class BatchExecutor:
    """``process_batch`` and the vectorised path's admission (a mixin of :class:`SwitchModel`)."""

    # -- batches -----------------------------------------------------------------
    def process_batch(self, packets) -> list[list[tuple[int, bytes]]]:
        """Process frames in order, as ``process`` would one by one; one output list per frame.

        Batches shorter than ``VEC_MIN_BATCH`` run frame by frame.  Longer ones
        are vectorised: admission, the workers look-up and the output frames
        are numpy operations over the whole batch; the per-packet decisions
        (chunk / bitmap / counter / exponent registers) run in one generated
        loop over int lists; the value-register operations of the whole batch
        are applied at once (segment sums, see ``_values_vec``).  This gives
        the same outputs, counters and registers as processing the frames one
        at a time.  A call costs a fixed part plus a part per frame, so larger
        batches run faster (``bench/model.py``).  A plan the vectorised path
        cannot run decides frame by frame and applies the value operations of
        the batch at once.
        """
        L = self.layout
        if not self.fast or len(packets) < VEC_MIN_BATCH or not self._values_batchable:
            return [self.process(f, p) for f, p in packets]
        if self._vec and self._vw is not False:
            return self._process_batch_vec(packets)
        results: list = [None] * len(packets)
        fixed_len, unpack = L.fixed_len, L.struct.unpack_from
        ihl_i, ihl_s, ihl_m = self._ihl
        i_et, i_pr, i_dp = self._i_etype, self._i_proto, self._i_dport
        lo, hi = L.udp_port_min, L.udp_port_max
        i_tsi, i_exp = self._i_tsi, self._i_exp
        decide = self._decide_fast
        omni = self._omni
        i_next = self._i_next if omni else 0
        pk, by = self._pk, self._by
        deferred = []          # (index, frame, port, u, action, exp_out, mgid, op, base)
        for i, (frame, port) in enumerate(packets):
            if len(frame) < fixed_len:
                results[i] = self._process_short(frame, port)
                continue
            u = unpack(frame)
            if (u[i_et] != ETHERTYPE_IPV4 or (u[ihl_i] >> ihl_s) & ihl_m != 5 or u[i_pr] != IPPROTO_UDP
                    or not lo <= u[i_dp] <= hi):
                results[i] = self._forward_l2(frame, port, u[self._i_eth_dst])
                continue
            ctx = self._admit(frame, port, u)
            if ctx is None:
                results[i] = []
                continue
            sc, slot, copy, word, mask, nw, mgid, data, bound = ctx
            vop: list = []
            action, stat, exp_out, _, nxt_out = decide(frame, sc, slot, copy, word, mask, nw, u[i_tsi], u[i_exp],
                                                       data, u[i_next] if omni else 0, vop, bound)
            pk[stat] += 1
            by[stat] += len(frame)
            deferred.append((i, frame, port, u, action, exp_out, mgid, vop[0] if vop else None, data, nxt_out))
        if deferred:
            carried = self._apply_values_batch(deferred)
            for (i, frame, port, u, action, exp_out, mgid, _v, data, nxt_out), payload in zip(deferred, carried):
                results[i] = [] if action == self._out_drop else self._emit(frame, port, u, action, exp_out,
                                                                         payload, mgid, data, nxt_out)
        return results

    # -- vectorised batches ---------------------------------------------------------
    def _init_vec(self) -> None:
        """Precompute what :meth:`_process_batch_vec` needs: record dtypes, field views, the decision loop.

        ``self._vec`` stays False when the plan's layout has something the
        vector path does not handle (then batches run frame by frame).
        """
        L = self.layout
        self._vec = False
        self._rec_cache: dict[int, np.dtype] = {}
        units, off = [], 0
        fmt = L.struct.format.lstrip(">")
        codes = []
        k = 0
        while k < len(fmt):                     # struct codes, e.g. "6s6sHBBHHHBBHII..."
            j = k
            while fmt[j].isdigit():
                j += 1
            codes.append(fmt[k:j + 1])
            k = j + 1
        for code, size in zip(codes, L.unit_sizes):
            units.append((off, {"B": "u1", "H": ">u2", "I": ">u4", "Q": ">u8"}.get(code, f"V{size}")))
            off += size
        self._units = units
        self._sig = self._kx = self._vx = self._res_bytes = None
        self._gvec: dict[int, GroupArrays] = {}
        # byte offsets of the fields a result rewrites (whole units of the sizes below)
        fields = (self._i_eth_dst, self._i_eth_src, self._i_ip_src, self._i_ip_dst, self._i_sport, self._i_dport)
        if [L.unit_sizes[i] for i in fields] != [6, 6, 4, 4, 2, 2]:
            return
        self._rw = tuple(units[i][0] for i in fields) + (self._ip_off, L.ipv4_len, self._ck_off)
        self._sig = self._signature(units)
        mt, ex = L.slot("agg.msg_type"), L.slot("agg.exponent")
        if (L.unit_sizes[mt.index] == 1 and ex.shift is None and L.unit_sizes[ex.index] in (1, 2, 4)
                and L.unit_sizes[self._i_udp_ck] == 2):
            self._res_bytes = (units[mt.index][0], 0xFF & ~(mt.mask << (mt.shift or 0)),
                               self._msg_result << (mt.shift or 0), units[ex.index][0], L.unit_sizes[ex.index],
                               units[self._i_udp_ck][0])
        key_subs = self._wkey_sub
        if any(s.raw for s in key_subs):
            return
        # the decision loop over ints: observation codes must be dense 0..r-1
        for name in self._yields:
            if sorted(self.codes.observations[name].values()) != list(range(len(self.codes.observations[name]))):
                return
        self._vec_loop = self._make_loop()
        # workers keys of whole bytes that leave at least one byte for the ingress port: exact look-ups
        kb = []
        for s_ in key_subs:
            if s_.shift is not None:
                kb = None
                break
            o_ = units[s_.index][0]
            kb.extend(range(o_, o_ + L.unit_sizes[s_.index]))
        if kb is not None and len(kb) <= 7:
            self._kx = (np.array(kb, dtype=np.int64), 8 - len(kb), [L.unit_sizes[s_.index] for s_ in key_subs])
        self._vec_workers_sync()
        self._vec = True

    def _signature(self, units):
        """(byte offsets, masks, values): a frame whose bytes there, masked, equal the values is
        IPv4 with a 5-word header, UDP to the aggregation port range and a contribution, so it needs
        none of the checks of :meth:`_parse_checks` but the length.  None when the port range is
        not an aligned power-of-two block (then every batch takes those checks)."""
        L = self.layout
        lo, hi = L.udp_port_min, L.udp_port_max
        size = hi - lo + 1
        if size & (size - 1) or lo % size:
            return None
        want = [("ethernet.ether_type", 0xFFFF, ETHERTYPE_IPV4), ("ipv4.ihl", 0xF, 5),
                ("ipv4.protocol", 0xFF, IPPROTO_UDP), ("udp.dst_port", 0xFFFF & ~(size - 1), lo),
                ("agg.msg_type", 0xF, self._msg_contrib)]
        masks: dict[int, list[int]] = {}
        for name, mask, value in want:
            sl = self.layout.slot(name)
            off, _fmt = units[sl.index]
            n = L.unit_sizes[sl.index]
            mask &= sl.mask
            if value & ~mask:
                return None
            shift = sl.shift or 0
            for b in range(n):                    # big-endian bytes of the unit
                bit = 8 * (n - 1 - b)
                mb, vb = ((mask << shift) >> bit) & 0xFF, ((value << shift) >> bit) & 0xFF
                if mb:
                    m0, v0 = masks.get(off + b, [0, 0])
                    masks[off + b] = [m0 | mb, v0 | vb]
        offs = sorted(masks)
        return (np.array(offs, dtype=np.int64), np.array([masks[o][0] for o in offs], dtype=np.uint8),
                np.array([masks[o][1] for o in offs], dtype=np.uint8))

    def _rec(self, length: int) -> np.dtype:
        """Structured dtype of one frame of ``length`` bytes: field ``u{i}`` is struct unit i."""
        dt = self._rec_cache.get(length)
        if dt is None:
            dt = np.dtype({"names": [f"u{i}" for i in range(len(self._units))],
                           "formats": [f for _, f in self._units],
                           "offsets": [o for o, _ in self._units], "itemsize": length})
            self._rec_cache[length] = dt
        return dt

    def _col(self, rec, name: str) -> np.ndarray:
        """One header field of every frame of a record array (a view for whole units)."""
        s = self.layout.slot(name)
        u = rec[f"u{s.index}"]
        if s.shift is None:
            return u
        return (u >> s.shift) & s.mask

    def _parse_checks(self, rec, Lg, idx, frames, ports, data, results):
        """The admission checks of one length group frame by frame (as arrays): other traffic is
        forwarded, malformed aggregation frames counted and dropped.  Returns the rows that remain,
        or None when none does."""
        L = self.layout
        cand = ((self._col(rec, "ethernet.ether_type") == ETHERTYPE_IPV4) & (self._col(rec, "ipv4.ihl") == 5)
                & (self._col(rec, "ipv4.protocol") == IPPROTO_UDP))
        dport = self._col(rec, "udp.dst_port")
        cand &= (dport >= L.udp_port_min) & (dport <= L.udp_port_max)
        if not cand.all():
            for r in (~cand).nonzero()[0].tolist():
                i = idx[r]
                results[i] = self._forward_l2(frames[i], ports[i], frames[i][:6])
        if self._omni:
            bad = ((data == 1) & (Lg < L.frame_len)) if Lg < L.frame_len else np.zeros(len(idx), bool)
        else:
            bad = np.zeros(len(idx), bool) if Lg >= L.frame_len else np.ones(len(idx), bool)
        bad |= self._col(rec, "agg.msg_type") != self._msg_contrib
        bad &= cand
        nbad = int(np.count_nonzero(bad))
        if nbad:
            s = self._stat["drop_malformed"]
            self._pk[s] += nbad
            self._by[s] += nbad * Lg
            for r in bad.nonzero()[0].tolist():
                results[idx[r]] = []
        rows = (cand & ~bad).nonzero()[0]
        return rows if len(rows) else None

    def _process_batch_vec(self, packets) -> list[list[tuple[int, bytes]]]:
        L = self.layout
        B = len(packets)
        results: list = [None] * B
        frames, ports = zip(*packets)
        lens = list(map(len, frames))
        fixed = L.fixed_len
        first = lens[0]
        if lens.count(first) == B:
            groups = {first: list(range(B))}
        else:
            groups = {}
            for i, n in enumerate(lens):
                groups.setdefault(n, []).append(i)
        adm = []              # per length group: (Lg, A8, rec, rows, batch indices, slot, copy, pv, sub, data)
        for Lg, idx in groups.items():
            if Lg < fixed:
                for i in idx:
                    results[i] = self._process_short(frames[i], ports[i])
                continue
            blob = b"".join([frames[i] for i in idx]) if len(idx) != B else b"".join(frames)
            A8 = np.frombuffer(blob, np.uint8).reshape(-1, Lg)      # the group's frames as a byte matrix
            port_col = np.fromiter(ports if len(idx) == B else [ports[i] for i in idx], dtype=np.int64,
                                   count=len(idx))
            a = self._admit_group(A8, idx, port_col, len(idx) == B, frames, ports, results)
            if a is not None:
                adm.append(a)
        if not adm:
            return results
        d = self._decide_vec(adm)
        order, gidx, emit, A_a, E_a, N_a, MG, carried, has_carry, data_a = d
        gl = gidx.tolist() if order is None else gidx[order].tolist()
        if len(gl) == B:
            results = [[] for _ in gl]
        else:
            for k in gl:
                results[k] = []
        if not len(emit):
            return results
        m = len(A_a)
        if order is None:
            grp = np.zeros(m, dtype=np.int64)
            row = adm[0][3]
        else:
            grp = np.concatenate([np.full(len(a[4]), j, dtype=np.int64) for j, a in enumerate(adm)])[order]
            row = np.concatenate([a[3] for a in adm])[order]
        for j, a in enumerate(adm):
            sel = emit if order is None else emit[grp[emit] == j]
            if not len(sel):
                continue
            if not self._omni:
                self._emit_vec(a[0], a[1], sel, False, row, A_a, E_a, N_a, MG, carried, has_carry, gl, ports,
                               results)
                continue
            grow = (~data_a[sel]) & has_carry[sel]
            for gsel in ((sel[~grow], False), (sel[grow], True)):
                if len(gsel[0]):
                    self._emit_vec(a[0], a[1], gsel[0], gsel[1], row, A_a, E_a, N_a, MG, carried, has_carry,
                                   gl, ports, results)
        return results

    def _admit_group(self, A8, idx, port_col, whole: bool, frames, ports, results):
        """Admission of one length group (the byte matrix ``A8`` of the frames at batch indices ``idx``,
        ingress ports ``port_col``): the header checks (forwarding other traffic, dropping what is
        malformed), the workers look-up and the slot range, with their counters.  Returns
        (Lg, A8, rec, rows, batch indices, slot, copy, workers entry, records, data) of the packets that
        go on to the decision, or None when none does.  ``whole``: the group is the whole batch."""
        L = self.layout
        st = self._stat
        pk, by = self._pk, self._by
        Lg = A8.shape[1]
        rec = A8.reshape(-1).view(self._rec(Lg))
        data = self._col(rec, "agg.flags") & 1 if self._omni else None
        sig = self._sig
        if (sig is not None and (Lg >= L.frame_len or (data is not None and not data.any()))
                and ((A8[:, sig[0]] & sig[1]) == sig[2]).all()):
            # every frame an aggregation contribution of full length (OmniReduce: or header-only, none
            # of them flagged as carrying data): none of the checks of _parse_checks can fail
            rows = np.arange(len(idx))
        else:
            rows = self._parse_checks(rec, Lg, idx, frames, ports, data, results)
            if rows is None:
                return None
        sub = rec if len(rows) == len(rec) else rec[rows]      # copying records is slow: view when all pass
        if len(rows) != len(idx):
            port_col = port_col[rows]
        known, pv = self._workers_batch(A8, rows, sub, port_col)
        all_known = bool(known.all())
        if not all_known:
            nunk = len(known) - int(np.count_nonzero(known))
            s = st["drop_unknown"]
            pk[s] += nunk
            by[s] += nunk * Lg
        pool = self._col(sub, "agg.pool_index").astype(np.int64)
        sij = pool & self._slot_mask
        badslot = sij >= pv[:, 5]
        if not all_known:
            badslot &= known
        nbs = int(np.count_nonzero(badslot))
        if nbs:
            s = st["drop_bad_slot"]
            pk[s] += nbs
            by[s] += nbs * Lg
        grow_rows = rows
        if nbs or not all_known:
            go = known & ~badslot
            if results is not None:
                for r in rows[~go].tolist():
                    results[idx[r]] = []
            g = go.nonzero()[0]
            if not len(g):
                return None
            pv, pool, sij, grow_rows, sub = pv[g], pool[g], sij[g], rows[g], sub[g]
        if self._agg_rx is not None:
            pk[self._agg_rx] += len(grow_rows)
            by[self._agg_rx] += len(grow_rows) * Lg
        copy = (pool >> self._slot_bits) & 1
        slot = (pv[:, 4] + sij) & 0xFFFF
        gidx = np.asarray(idx, dtype=np.int64)[grow_rows] if not whole else grow_rows
        return (Lg, A8, rec, grow_rows, gidx, slot, copy, pv, sub, None if data is None else data[grow_rows])

    def _decide_vec(self, adm):
        """The decisions of the admitted packets of ``adm`` in batch order: the generated decision loop,
        the counters and the value registers.  Returns (order, batch indices, emitting packets, outcome,
        exponent out, next out, multicast group, carried values, which carry values, data flags), in
        the packets' batch order (``order``: the permutation from the groups' concatenation to it,
        None with one group)."""
        pk, by = self._pk, self._by
        if len(adm) == 1:
            Lg, A8, rec, grow_rows, gidx, slot, copy, pv, sub, data = adm[0]
            order = None
        else:
            gidx = np.concatenate([a[4] for a in adm])
            order = np.argsort(gidx, kind="stable")
            slot = np.concatenate([a[5] for a in adm])[order]
            copy = np.concatenate([a[6] for a in adm])[order]
            pv = np.concatenate([a[7] for a in adm])[order]
            sub = None
            data = None if not self._omni else np.concatenate([a[9] for a in adm])[order]

        # per-packet header columns in batch order
        def gcol(name):
            if order is None:
                return self._col(sub, name)
            return np.concatenate([self._col(a[8], name) for a in adm])[order]
        m = len(slot)
        sc = (slot << 1) | copy
        exp_c = gcol("agg.exponent")
        column = {"sc": lambda: sc, "slot": lambda: slot, "copy": lambda: copy, "word": lambda: pv[:, 1],
                  "mask": lambda: pv[:, 2], "m": lambda: pv[:, 7],
                  "n": lambda: pv[:, 3], "tsi": lambda: gcol("agg.tsi"), "bound": lambda: pv[:, 5] * 2,
                  "exp": lambda: exp_c,
                  "data": lambda: data, "nxt": lambda: gcol("agg.next")}
        outs = self._vec_loop(*[column[x]().tolist() for x in self._vec_inputs])
        O_a = np.fromiter(outs[0], dtype=np.int64, count=m)      # fromiter: far cheaper than asarray on a list
        E_a = np.fromiter(outs[1], dtype=np.int64, count=m) if self._vec_has_e else exp_c.astype(np.int64)
        if self._vec_has_n:
            N_a = np.fromiter(outs[-1], dtype=np.int64, count=m)
        else:
            N_a = gcol("agg.next").astype(np.int64) if self._omni else None
        S_a = self._vec_os[O_a]
        A_a = self._vec_oa[O_a]
        VO_a = self._vec_vo_full[O_a]
        # counters
        cnt = np.bincount(S_a, minlength=len(pk)).tolist()
        if len(adm) == 1:
            Lg0 = adm[0][0]
            byt = [c * Lg0 for c in cnt]
        else:
            lens_adm = np.concatenate([np.full(len(a[4]), a[0], dtype=np.int64) for a in adm])[order]
            byt = np.bincount(S_a, weights=lens_adm, minlength=len(pk)).tolist()
        for s, c in enumerate(cnt):
            if c:
                pk[s] += c
                by[s] += int(byt[s])
        # value registers: the whole batch at once
        data_a = data.astype(bool) if self._omni else None      # every packet carries data otherwise
        emits = A_a != self._out_drop
        carried, has_carry = self._values_vec(sc, VO_a, data_a, adm, order, emits)
        return (order, gidx, emits.nonzero()[0], A_a, E_a, N_a, pv[:, 6], carried, has_carry, data_a)

    # -- frame matrices -------------------------------------------------------------
    def process_matrix(self, A8: np.ndarray, ports: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Process the rows of the byte matrix ``A8`` (one frame per row, all of one length) that
        arrived on ``ports``, in row order, as :meth:`process_batch` would; return each egress port's
        frames as a byte matrix, in the order :meth:`process_batch`'s outputs give them.

        The packet path of a data plane that reads frames straight from a packet ring: no bytes
        object per frame in or out.  A batch of aggregation contributions of full length on a
        SwitchML plan runs the vectorised path and builds its results per egress port (multicast
        replicas are one broadcast over (packets, replicas), so each port's frames are a strided view);
        any other batch goes through :meth:`process_batch` frame by frame and is regrouped."""
        B, Lg = A8.shape
        L = self.layout
        sig = self._sig
        if (not self.fast or B < VEC_MIN_BATCH or not self._values_batchable or not self._vec
                or self._vw is False or self._omni or sig is None or Lg < L.frame_len
                or not ((A8[:, sig[0]] & sig[1]) == sig[2]).all()):
            return self._regroup(self.process_batch(list(zip([r.tobytes() for r in A8], ports.tolist()))))
        A8 = np.ascontiguousarray(A8)
        a = self._admit_group(A8, range(B), np.asarray(ports, dtype=np.int64), True, None, None, None)
        if a is None:
            return []
        d = self._decide_vec([a])
        order, gidx, emit, A_a, E_a, N_a, MG, carried, has_carry, _data = d
        if not len(emit):
            return []
        return self._emit_ports(Lg, A8, emit, a[3], gidx, A_a, E_a, MG, carried, has_carry, ports)

    def process_groups(self, groups, B: int) -> list[tuple[int, np.ndarray]]:
        """Process a round of frames of several lengths as :meth:`process_batch` would in arrival order:
        ``groups`` holds, per length, the byte matrix of its frames, their ingress ports and their
        positions among the ``B`` frames of the round.  Returns each egress port's frames as byte
        matrices, in the order :meth:`process_batch`'s outputs give them.

        An OmniReduce job's contributions come in two lengths, header-only and with the data header.
        When every frame of the round is such a contribution (the header signature of one, and no
        header-only frame flagged as carrying data), the round runs the vectorised path over every
        group at once and writes each egress port's results as one matrix (:meth:`_emit_pieces`), as
        :meth:`process_matrix` does for frames of one length; any other round goes through
        :meth:`process_batch` and is regrouped."""
        L = self.layout
        sig = self._sig
        fast = (self.fast and self._omni and B >= VEC_MIN_BATCH and self._values_batchable and self._vec
                and self._vw is not False and sig is not None)
        mats = []
        for A8, _p, _i in groups:
            Lg = A8.shape[1]
            if fast and not (L.fixed_len <= Lg <= L.frame_len and ((A8[:, sig[0]] & sig[1]) == sig[2]).all()):
                fast = False
            if fast and Lg < L.frame_len:
                A8 = np.ascontiguousarray(A8)
                fast = not (self._col(A8.reshape(-1).view(self._rec(Lg)), "agg.flags") & 1).any()
            mats.append(A8)
        if not fast:
            at = np.concatenate([np.asarray(i) for _A, _p, i in groups])
            frames = [(r.tobytes(), p) for A8, ports, _i in groups for r, p in zip(A8, np.asarray(ports).tolist())]
            return self._regroup(self.process_batch([frames[k] for k in np.argsort(at).tolist()]))
        ports_all = np.zeros(B, dtype=np.int64)
        adm = []
        for A8, (_A, ports, idx) in zip(mats, groups):
            idx = np.asarray(idx, dtype=np.int64)
            ports = np.asarray(ports, dtype=np.int64)
            ports_all[idx] = ports
            a = self._admit_group(np.ascontiguousarray(A8), idx, ports, False, None, None, None)
            if a is not None:
                adm.append(a)
        if not adm:
            return []
        order, gidx, emit, A_a, E_a, N_a, MG, carried, has_carry, data_a = self._decide_vec(adm)
        if not len(emit):
            return []
        if order is None:
            grp = np.zeros(len(A_a), dtype=np.int64)
            row = adm[0][3]
        else:                                    # the decided packets are in arrival order: so are these
            grp = np.concatenate([np.full(len(a[4]), j, dtype=np.int64) for j, a in enumerate(adm)])[order]
            row = np.concatenate([a[3] for a in adm])[order]
            gidx = gidx[order]
        pieces = []
        for j, a in enumerate(adm):
            sel = emit[grp[emit] == j]
            grow = (~data_a[sel]) & has_carry[sel]          # a header-only packet's result carries the block
            pieces += [(a[0], a[1], g, flag) for g, flag in ((sel[~grow], False), (sel[grow], True)) if len(g)]
        return self._emit_pieces(pieces, row, gidx, A_a, E_a, N_a, MG, carried, has_carry, ports_all)

    @staticmethod
    def _regroup(results) -> list[tuple[int, np.ndarray]]:
        """Per-frame outputs as per-port byte matrices (runs of equal length), in output order."""
        per: dict[int, list[bytes]] = {}
        for outs in results:
            for eport, frame in outs:
                q = per.get(eport)
                if q is None:
                    per[eport] = [frame]
                else:
                    q.append(frame)
        out = []
        for port, frames in per.items():
            k = 0
            while k < len(frames):
                n = len(frames[k])
                j = k + 1
                while j < len(frames) and len(frames[j]) == n:
                    j += 1
                out.append((port, np.frombuffer(b"".join(frames[k:j]), np.uint8).reshape(j - k, n)))
                k = j
        return out
