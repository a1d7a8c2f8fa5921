"""The batch path: ``process_batch``, ``process_matrix`` and ``process_groups``, vectorised over frames.

:class:`BatchPath` admits a whole batch with numpy (length groups, header
signature or per-field checks, the workers look-up of
:class:`.WorkerLookup`), runs the generated decision loop
(:class:`.DecisionLoop`) once over the batch, applies the value-register
operations at once (:class:`.BatchValues`) and builds the result frames
(:class:`.BatchEmitter`).  Outputs, counters and registers are those of
processing the frames one at a time with :class:`.PacketPath`, which also
runs the batches the vectorised path cannot.
"""

from __future__ import annotations

import numpy as np

from ..wire import ETHERTYPE_IPV4, IPPROTO_UDP, FrameLayout
from .batch_emit import BatchEmitter, rewrite_offsets
from .batch_values import Admitted, BatchValues
from .batch_workers import WorkerLookup
from .decider import DecisionProgram
from .decision_loop import DecisionLoop
from .fields import FrameFields, FrameRecords
from .interpreter import PacketPath
from .kernels import Kernels
from .state import SwitchState

# batches at least this long take the vectorised path; shorter ones run frame by frame, which is
# faster there: a vectorised call has a fixed cost of some hundreds of us (its numpy calls), while
# ``process`` costs the same per frame whatever the batch (bench/model.py prints both)
VEC_MIN_BATCH = 32


class BatchPath:
    """Batches of frames: :meth:`process_batch`, :meth:`process_matrix`, :meth:`process_groups`.

    Built from the parts it uses: the layout and its :class:`.FrameFields`,
    the :class:`.SwitchState` it reads and updates, the
    :class:`.DecisionProgram` (its expansion becomes :attr:`loop`) and the
    :class:`.PacketPath` for what runs frame by frame.  It owns the workers
    look-up, the value-register and the result-frame helpers.

    :attr:`vectorised`: whether batches take the vectorised path (False when
    the plan's layout or table has something it does not handle; then
    batches decide frame by frame and apply their value ops at once).  It may
    be set False to run that path instead.  :attr:`loop`: the generated
    decision loop (None when not vectorised at construction).
    """

    def __init__(self, layout: FrameLayout, fields: FrameFields, state: SwitchState, program: DecisionProgram,
                 packets: PacketPath, kernels: Kernels, fast: bool = True):
        L, f = layout, fields
        self._layout = layout
        self._records = records = FrameRecords(layout)
        self._packets = packets
        self._fast = fast
        self._values_batchable = program.values_batchable
        self._decide = program.decide
        self._pk, self._by, self._stat = state.stat_packets, state.stat_bytes, state.stat_index
        self._agg_rx = state.stat_index.get("agg_rx")
        self._omni = f.omni
        self._ihl, self._i_etype, self._i_proto, self._i_dport = f.ihl, f.etype, f.proto, f.dport
        self._i_eth_dst, self._i_tsi, self._i_exp, self._i_next = f.eth_dst, f.tsi, f.exp, f.next
        self._slot_mask, self._slot_bits, self._msg_contrib = f.slot_mask, f.slot_bits, f.msg_contrib
        self._out_drop = f.out_drop
        self._workers = WorkerLookup(layout, f, records, state)
        self._values = BatchValues(layout, state, kernels)
        self._emitter: BatchEmitter | None = None
        self._sig = None
        self.loop: DecisionLoop | None = None
        self.vectorised = False
        rewrite = rewrite_offsets(L, f, records)
        if rewrite is None:
            return
        self._emitter = BatchEmitter(L, f, records, state, rewrite)
        self._sig = self._signature()
        if any(s.raw for s in f.worker_key):
            return
        # the decision loop over ints: observation codes must be dense 0..r-1
        obs = program.codes.observations
        for name in program.observations:
            if sorted(obs[name].values()) != list(range(len(obs[name]))):
                return
        self.loop = DecisionLoop(program, state)
        self.vectorised = True

    def process_batch(self, packets) -> list[list[tuple[int, bytes]]]:
        """Process frames in order, as ``process`` would one by one; one output list per frame.

        Batches shorter than ``VEC_MIN_BATCH`` run frame by frame.  Longer ones
        are vectorised: admission, the workers look-up and the output frames
        are numpy operations over the whole batch; the per-packet decisions
        (chunk / bitmap / counter / exponent registers) run in one generated
        loop over int lists; the value-register operations of the whole batch
        are applied at once (segment sums, see :meth:`.BatchValues.apply`).  This gives
        the same outputs, counters and registers as processing the frames one
        at a time.  A call costs a fixed part plus a part per frame, so larger
        batches run faster (``bench/model.py``).  A plan the vectorised path
        cannot run decides frame by frame and applies the value operations of
        the batch at once.
        """
        L = self._layout
        if not self._fast or len(packets) < VEC_MIN_BATCH or not self._values_batchable:
            process = self._packets.process
            return [process(f, p) for f, p in packets]
        if self.vectorised and self._workers.usable:
            return self._process_batch_vec(packets)
        results: list = [None] * len(packets)
        fixed_len, unpack = L.fixed_len, L.struct.unpack_from
        ihl_i, ihl_s, ihl_m = self._ihl
        i_et, i_pr, i_dp = self._i_etype, self._i_proto, self._i_dport
        lo, hi = L.udp_port_min, L.udp_port_max
        i_tsi, i_exp = self._i_tsi, self._i_exp
        decide = self._decide
        omni = self._omni
        i_next = self._i_next if omni else 0
        pk, by = self._pk, self._by
        path = self._packets
        admit = path.admit
        deferred = []          # (index, frame, port, u, action, exp_out, mgid, (op, base) or None, data, nxt_out)
        for i, (frame, port) in enumerate(packets):
            if len(frame) < fixed_len:
                results[i] = path.short(frame, port)
                continue
            u = unpack(frame)
            if (u[i_et] != ETHERTYPE_IPV4 or (u[ihl_i] >> ihl_s) & ihl_m != 5 or u[i_pr] != IPPROTO_UDP
                    or not lo <= u[i_dp] <= hi):
                results[i] = path.forward_l2(frame, port, u[self._i_eth_dst])
                continue
            ctx = admit(frame, port, u)
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
            carried = self._values.apply_deferred(deferred)
            for (i, frame, port, u, action, exp_out, mgid, _v, data, nxt_out), payload in zip(deferred, carried):
                results[i] = [] if action == self._out_drop else path.emit(frame, port, u, action, exp_out, payload,
                                                                           mgid, data, nxt_out)
        return results

    def _signature(self):
        """(byte offsets, masks, values): a frame whose bytes there, masked, equal the values is
        IPv4 with a 5-word header, UDP to the aggregation port range and a contribution, so it needs
        none of the checks of :meth:`_parse_checks` but the length.  None when the port range is
        not an aligned power-of-two block (then every batch takes those checks)."""
        L = self._layout
        lo, hi = L.udp_port_min, L.udp_port_max
        size = hi - lo + 1
        if size & (size - 1) or lo % size:
            return None
        want = [("ethernet.ether_type", 0xFFFF, ETHERTYPE_IPV4), ("ipv4.ihl", 0xF, 5),
                ("ipv4.protocol", 0xFF, IPPROTO_UDP), ("udp.dst_port", 0xFFFF & ~(size - 1), lo),
                ("agg.msg_type", 0xF, self._msg_contrib)]
        masks: dict[int, list[int]] = {}
        for name, mask, value in want:
            sl = self._layout.slot(name)
            off = self._records.offset(sl.index)
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

    def _parse_checks(self, rec, Lg, idx, frames, ports, data, results):
        """The admission checks of one length group frame by frame (as arrays): other traffic is
        forwarded, malformed aggregation frames counted and dropped.  Returns the rows that remain,
        or None when none does."""
        L = self._layout
        col = self._records.column
        cand = ((col(rec, "ethernet.ether_type") == ETHERTYPE_IPV4) & (col(rec, "ipv4.ihl") == 5)
                & (col(rec, "ipv4.protocol") == IPPROTO_UDP))
        dport = col(rec, "udp.dst_port")
        cand &= (dport >= L.udp_port_min) & (dport <= L.udp_port_max)
        if not cand.all():
            for r in (~cand).nonzero()[0].tolist():
                i = idx[r]
                results[i] = self._packets.forward_l2(frames[i], ports[i], frames[i][:6])
        if self._omni:
            bad = ((data == 1) & (Lg < L.frame_len)) if Lg < L.frame_len else np.zeros(len(idx), bool)
        else:
            bad = np.zeros(len(idx), bool) if Lg >= L.frame_len else np.ones(len(idx), bool)
        bad |= col(rec, "agg.msg_type") != self._msg_contrib
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
        L = self._layout
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
        adm = []              # per length group: its Admitted packets
        for Lg, idx in groups.items():
            if Lg < fixed:
                for i in idx:
                    results[i] = self._packets.short(frames[i], ports[i])
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
            row = adm[0].rows
        else:
            grp = np.concatenate([np.full(len(a.batch_index), j, dtype=np.int64) for j, a in enumerate(adm)])[order]
            row = np.concatenate([a.rows for a in adm])[order]
        for j, a in enumerate(adm):
            sel = emit if order is None else emit[grp[emit] == j]
            if not len(sel):
                continue
            if not self._omni:
                self._emitter.per_packet(a.length, a.frames, sel, False, row, A_a, E_a, N_a, MG, carried, has_carry,
                                         gl, ports, results)
                continue
            grow = (~data_a[sel]) & has_carry[sel]
            for gsel in ((sel[~grow], False), (sel[grow], True)):
                if len(gsel[0]):
                    self._emitter.per_packet(a.length, a.frames, gsel[0], gsel[1], row, A_a, E_a, N_a, MG, carried,
                                             has_carry, gl, ports, results)
        return results

    def _admit_group(self, A8, idx, port_col, whole: bool, frames, ports, results) -> Admitted | None:
        """Admission of one length group (the byte matrix ``A8`` of the frames at batch indices ``idx``,
        ingress ports ``port_col``): the header checks (forwarding other traffic, dropping what is
        malformed), the workers look-up and the slot range, with their counters.  Returns the
        :class:`.Admitted` packets that go on to the decision, or None when none does.  ``whole``: the group is the whole batch."""
        L = self._layout
        st = self._stat
        pk, by = self._pk, self._by
        Lg = A8.shape[1]
        rec = A8.reshape(-1).view(self._records.dtype(Lg))
        data = self._records.column(rec, "agg.flags") & 1 if self._omni else None
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
        known, pv = self._workers.lookup(A8, rows, sub, port_col)
        all_known = bool(known.all())
        if not all_known:
            nunk = len(known) - int(np.count_nonzero(known))
            s = st["drop_unknown"]
            pk[s] += nunk
            by[s] += nunk * Lg
        pool = self._records.column(sub, "agg.pool_index").astype(np.int64)
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
        return Admitted(Lg, A8, rec, grow_rows, gidx, slot, copy, pv, sub, None if data is None else data[grow_rows])

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
            gidx = np.concatenate([a.batch_index for a in adm])
            order = np.argsort(gidx, kind="stable")
            slot = np.concatenate([a.slot for a in adm])[order]
            copy = np.concatenate([a.copy for a in adm])[order]
            pv = np.concatenate([a.params for a in adm])[order]
            sub = None
            data = None if not self._omni else np.concatenate([a.data for a in adm])[order]

        # per-packet header columns in batch order
        col = self._records.column

        def gcol(name):
            if order is None:
                return col(sub, name)
            return np.concatenate([col(a.sub, name) for a in adm])[order]
        m = len(slot)
        sc = (slot << 1) | copy
        exp_c = gcol("agg.exponent")
        column = {"sc": lambda: sc, "slot": lambda: slot, "copy": lambda: copy, "word": lambda: pv[:, 1],
                  "mask": lambda: pv[:, 2], "m": lambda: pv[:, 7],
                  "n": lambda: pv[:, 3], "tsi": lambda: gcol("agg.tsi"), "bound": lambda: pv[:, 5] * 2,
                  "exp": lambda: exp_c,
                  "data": lambda: data, "nxt": lambda: gcol("agg.next")}
        loop = self.loop
        outs = loop.run(*[column[x]().tolist() for x in loop.inputs])
        O_a = np.fromiter(outs[0], dtype=np.int64, count=m)      # fromiter: far cheaper than asarray on a list
        E_a = np.fromiter(outs[1], dtype=np.int64, count=m) if loop.has_exponent else exp_c.astype(np.int64)
        if loop.has_next:
            N_a = np.fromiter(outs[-1], dtype=np.int64, count=m)
        else:
            N_a = gcol("agg.next").astype(np.int64) if self._omni else None
        S_a = loop.outcome_stat[O_a]
        A_a = loop.outcome_action[O_a]
        VO_a = loop.values_op[O_a]
        # counters
        cnt = np.bincount(S_a, minlength=len(pk)).tolist()
        if len(adm) == 1:
            Lg0 = adm[0].length
            byt = [c * Lg0 for c in cnt]
        else:
            lens_adm = np.concatenate([np.full(len(a.batch_index), a.length, dtype=np.int64) for a in adm])[order]
            byt = np.bincount(S_a, weights=lens_adm, minlength=len(pk)).tolist()
        for s, c in enumerate(cnt):
            if c:
                pk[s] += c
                by[s] += int(byt[s])
        # value registers: the whole batch at once
        data_a = data.astype(bool) if self._omni else None      # every packet carries data otherwise
        emits = A_a != self._out_drop
        carried, has_carry = self._values.apply(sc, VO_a, data_a, adm, order, emits)
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
        L = self._layout
        sig = self._sig
        if (not self._fast or B < VEC_MIN_BATCH or not self._values_batchable or not self.vectorised
                or not self._workers.usable or self._omni or sig is None or Lg < L.frame_len
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
        return self._emitter.by_port(Lg, A8, emit, a.rows, gidx, A_a, E_a, MG, carried, has_carry, ports)

    def process_groups(self, groups, B: int) -> list[tuple[int, np.ndarray]]:
        """Process a round of frames of several lengths as :meth:`process_batch` would in arrival order:
        ``groups`` holds, per length, the byte matrix of its frames, their ingress ports and their
        positions among the ``B`` frames of the round.  Returns each egress port's frames as byte
        matrices, in the order :meth:`process_batch`'s outputs give them.

        An OmniReduce job's contributions come in two lengths, header-only and with the data header.
        When every frame of the round is such a contribution (the header signature of one, and no
        header-only frame flagged as carrying data), the round runs the vectorised path over every
        group at once and writes each egress port's results as one matrix
        (:meth:`.BatchEmitter.by_port_pieces`), as
        :meth:`process_matrix` does for frames of one length; any other round goes through
        :meth:`process_batch` and is regrouped."""
        L = self._layout
        sig = self._sig
        fast = (self._fast and self._omni and B >= VEC_MIN_BATCH and self._values_batchable and self.vectorised
                and self._workers.usable and sig is not None)
        mats = []
        for A8, _p, _i in groups:
            Lg = A8.shape[1]
            if fast and not (L.fixed_len <= Lg <= L.frame_len and ((A8[:, sig[0]] & sig[1]) == sig[2]).all()):
                fast = False
            if fast and Lg < L.frame_len:
                A8 = np.ascontiguousarray(A8)
                rec = A8.reshape(-1).view(self._records.dtype(Lg))
                fast = not (self._records.column(rec, "agg.flags") & 1).any()
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
            row = adm[0].rows
        else:                                    # the decided packets are in arrival order: so are these
            grp = np.concatenate([np.full(len(a.batch_index), j, dtype=np.int64) for j, a in enumerate(adm)])[order]
            row = np.concatenate([a.rows for a in adm])[order]
            gidx = gidx[order]
        pieces = []
        for j, a in enumerate(adm):
            sel = emit[grp[emit] == j]
            grow = (~data_a[sel]) & has_carry[sel]          # a header-only packet's result carries the block
            pieces += [(a.length, a.frames, g, flag) for g, flag in ((sel[~grow], False), (sel[grow], True)) if len(g)]
        return self._emitter.by_port_pieces(pieces, row, gidx, A_a, E_a, N_a, MG, carried, has_carry, ports_all)

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
