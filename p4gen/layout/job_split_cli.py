"""``p4gen plan --jobs jobs.toml``: the jobs file, the split table and the controller job files.

::

    switch_mac = "02:00:00:00:00:fe"     # optional, copied into every job file

    [[jobs]]
    name = "resnet"          # required, unique
    workers = 8              # required, 2 or more
    link_gbps = 100          # required
    rtt_us = 400             # required
    size = "1GiB"            # required: elements, or float32 bytes
    density = 1.0            # optional; below 1 the job is sparse (OmniReduce)
    framing_bytes = 24       # optional
    [[jobs.hosts]]           # optional, one per worker: id, port, mac, ip, udp_port as in a job file
    ...

Without ``hosts`` the job files give each worker p4gen's testbed addressing (worker k of
the switch overall: MAC 02:00:00:00:00:k, IP 10.0.0.k) on the ports of its pipe group's
home pipe; replace them with your hosts'.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..fileread import load_toml
from .cost import ETHERNET_FRAMING_BYTES, Workload
from .job_split import Job, Split, equal_split, home_pipe, plan_jobs
from .workload_args import opt, parse_size, value_widths

_JOB_KEYS = ("name", "workers", "link_gbps", "rtt_us", "size", "density", "framing_bytes", "ports_per_pipe", "hosts")
_HOST_KEYS = ("id", "port", "mac", "ip", "udp_port")


def load_jobs(path: str | Path) -> tuple[list[Job], dict[str, Any], dict[str, list[dict]]]:
    p = Path(path)
    doc = load_toml(p, "jobs file", SpecError)
    unknown = sorted(set(doc) - {"jobs", "switch_mac"})
    if unknown:
        raise SpecError(f"{p.name}: unknown key {unknown[0]!r}; known keys: jobs, switch_mac")
    raw = doc.get("jobs")
    if not isinstance(raw, list) or not all(isinstance(j, dict) for j in raw):
        raise SpecError(f"{p.name}: needs [[jobs]] tables")
    if "switch_mac" in doc and not (isinstance(doc["switch_mac"], str) and _MAC.fullmatch(doc["switch_mac"])):
        raise SpecError(f"{p.name}: switch_mac={doc['switch_mac']!r:.80} is not a MAC address (six hex octets, "
                        f"e.g. 02:00:00:00:00:fe)")
    jobs, hosts, names = [], {}, set()
    for i, j in enumerate(raw):
        where = f"{p.name}: jobs[{i}]"
        bad = sorted(set(j) - set(_JOB_KEYS))
        if bad:
            raise SpecError(f"{where} has an unknown key {bad[0]!r}; known keys: {', '.join(_JOB_KEYS)}")
        for key in ("name", "workers", "link_gbps", "rtt_us", "size"):
            if key not in j:
                raise SpecError(f"{where}.{key} is missing")
        name = j["name"]
        if (not isinstance(name, str) or not name or len(name) > 64 or not name.isascii()
                or not name.replace("-", "").replace("_", "").isalnum()):
            raise SpecError(f"{where}.name={name!r:.80} must be a word of at most 64 letters, digits, - and _")
        if name in names:
            raise SpecError(f"{where}.name={name!r} repeats an earlier job's")
        names.add(name)

        size = j["size"]
        if not isinstance(size, (int, str)) or isinstance(size, bool):
            raise SpecError(f"{where}.size={size!r} must be a number of elements or a size such as \"256MiB\"")
        try:
            # every value as the document gives it: Workload checks each by type and range
            wl = Workload(j["workers"], j["link_gbps"], j["rtt_us"], parse_size(str(size)), j.get("density", 1.0),
                          j.get("framing_bytes", ETHERNET_FRAMING_BYTES), ports_per_pipe=j.get("ports_per_pipe"))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
        jobs.append(Job(name, wl))
        if "hosts" in j:
            hosts[name] = _hosts(j["hosts"], wl.workers, f"{where}.hosts", doc.get("switch_mac"))
    return jobs, {"switch_mac": doc["switch_mac"]} if "switch_mac" in doc else {}, hosts


_MAC = re.compile(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}")


def _hosts(hs: Any, workers: int, where: str, switch_mac: str | None = None) -> list[dict]:
    """A job's ``hosts``, checked by type and range as a job file's workers are (p4gen ctl refuses the
    job file otherwise): one table per worker with port, mac, ip, udp_port and maybe id."""
    import ipaddress

    if not isinstance(hs, list) or len(hs) != workers or not all(isinstance(h, dict) for h in hs):
        raise SpecError(f"{where} must be {workers} tables, one per worker")
    out, ids = [], set()
    for k, h in enumerate(hs):
        bad = sorted(set(h) - set(_HOST_KEYS))
        if bad or not {"port", "mac", "ip", "udp_port"} <= set(h):
            raise SpecError(f"{where}[{k}] needs port, mac, ip and udp_port (and may give id)")
        entry = {"id": h.get("id", k)}
        for key, lo, hi, why in (("id", 0, workers - 1, "one per worker of the job"), ("port", 0, 511, "9-bit ports"),
                                 ("udp_port", 1, 65535, "a UDP port")):
            v = entry["id"] if key == "id" else h[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise SpecError(f"{where}[{k}].{key}={v!r} must be an integer in {lo}..{hi} ({why})")
            entry[key] = v
        if entry["id"] in ids:
            raise SpecError(f"{where}[{k}].id={entry['id']} repeats an earlier worker's")
        ids.add(entry["id"])
        mac = h["mac"]
        if not isinstance(mac, str) or not _MAC.fullmatch(mac):
            raise SpecError(f"{where}[{k}].mac={mac!r} is not a MAC address (six hex octets, e.g. 02:00:00:00:00:01)")
        ip = h["ip"]
        try:
            if not isinstance(ip, str) or not ip.isascii() or ip != ip.strip():
                raise ValueError(ip)
            ipaddress.IPv4Address(ip)
        except ValueError:
            raise SpecError(f"{where}[{k}].ip={ip!r} is not a dotted-quad IPv4 address") from None
        for j, o in enumerate(out):             # the rules p4gen ctl applies to a job file's workers
            if (o["port"], ipaddress.IPv4Address(o["ip"]), o["udp_port"]) == \
                    (entry["port"], ipaddress.IPv4Address(ip), entry["udp_port"]):
                raise SpecError(f"{where}[{k}] repeats hosts[{j}]'s port, ip and udp_port; the switch could not "
                                f"tell them apart")
            if o["mac"].lower() == mac.lower() and o["port"] != entry["port"]:
                raise SpecError(f"{where}[{k}].mac={mac} is on port {entry['port']} but hosts[{j}] has it on "
                                f"port {o['port']}")
        if switch_mac is not None and mac.lower() == switch_mac.lower():
            raise SpecError(f"{where}[{k}].mac={mac} is the switch_mac")
        out.append({"id": entry["id"], "port": entry["port"], "mac": mac, "ip": ip, "udp_port": entry["udp_port"]})
    return out


def _workers(profile, split: Split, plan, index0: int, given: list[dict] | None) -> list[dict]:
    if given is not None:
        return given
    home = home_pipe(profile, split, plan.group)
    out = []
    for k in range(plan.job.workload.workers):
        g = index0 + k + 1
        # TNA: 100G-class ports are 4 lanes apart within a pipe (dev_port = pipe << 7 | 4 i); v1model: 1, 2, ...
        port = (home << 7) | (4 * k) if profile.is_tna else g
        out.append({"id": k, "port": port, "mac": f"02:00:00:00:{g >> 8:02x}:{g & 0xff:02x}",
                    "ip": f"10.0.{g >> 8}.{g & 0xff}", "udp_port": 48864})
    return out


def _toml_job(number: int, plan, workers: list[dict], extra: dict[str, Any], generated: bool) -> str:
    lines = [f"# job {plan.job.name}: {plan.job.workload.workers} workers, pipe group {plan.group}, "
             f"slots {plan.slot_base}..{plan.slot_base + plan.slot_count - 1} (p4gen plan --jobs)"]
    if generated:
        lines.append("# worker addresses follow p4gen's testbed convention; replace them with your hosts'")
    lines += [f"job = {number}", f"mgid = {number}", f"slot_base = {plan.slot_base}", f"slot_count = {plan.slot_count}"]
    if "switch_mac" in extra:
        lines.append(f"switch_mac = {json.dumps(extra['switch_mac'])}")
    for w in workers:
        lines += ["", "[[workers]]"] + [f"{k} = {json.dumps(v)}" for k, v in w.items()]
    return "\n".join(lines) + "\n"


def plan_jobs_cli(args: argparse.Namespace, profile) -> int:
    from ..filecommit import write_files
    from ..filewrite import JSON, TOML, check_dir, check_file
    from .layoutfile import OUT_HINT, layout_document

    given = opt(args, "objective") if args.objective is not None else "makespan"
    objective = {"time": "makespan", "makespan": "makespan", "sum": "sum"}.get(given)
    if objective is None:
        raise SpecError(f"--objective {given!r}: with --jobs use makespan (default) or sum")
    jobs, extra, hosts = load_jobs(args.jobs)
    out_text = args.out if args.out is not None else str(Path("p4gen-out") / f"{profile.name}-jobs")
    out = Path(out_text)
    check_dir(out_text, SpecError)
    for name, kind, what in [("layout.json", JSON, "layout file")] + [(f"job-{j.name}.toml", TOML, "job file")
                                                                       for j in jobs]:
        check_file(out / name, kind, what, SpecError, hint=OUT_HINT)        # before the search, not after it
    from ..progress import steps

    split, evaluated = plan_jobs(profile, jobs, objective, args.variant, value_widths(args), progress=steps("plan"))
    equal = equal_split(profile, jobs, split)
    spec, shape = split.spec, split.shape
    doc = layout_document(profile.name, spec, shape, objective=objective,
                          jobs=[j.workload.to_dict() | {"name": j.name} for j in jobs])
    texts = {"layout.json": (json.dumps(doc), JSON, "layout file")}
    index0 = 0
    for number, plan in enumerate(split.jobs, start=1):
        workers = _workers(profile, split, plan, index0, hosts.get(plan.job.name))
        index0 += plan.job.workload.workers
        texts[f"job-{plan.job.name}.toml"] = (_toml_job(number, plan, workers, extra, plan.job.name not in hosts),
                                              TOML, "job file")
    write_files(out_text, texts, SpecError, hint=OUT_HINT)                   # all or nothing
    files = [out / n for n in texts if n.endswith(".toml")]
    print(render_split(profile, split, equal, evaluated))
    print(f"layout written to {out / 'layout.json'} (build it with: p4gen build --layout {out / 'layout.json'}); "
          f"job files: {', '.join(str(f) for f in files)}")
    return 0


def render_split(profile, split: Split, equal: Split, evaluated: int) -> str:
    s, sh = split.spec, split.shape
    gain = 100 * (equal.value - split.value) / equal.value
    name = "makespan" if split.objective == "makespan" else "sum of completion times"
    lines = [f"plan --jobs: {len(split.jobs)} jobs on {profile.name}, one {s.protocol} program: "
             f"{s.elements_per_packet} elements per packet in {sh.passes} {sh.mode} pass(es) over {sh.pipes} pipe(s), "
             f"{s.slots} slots to split; objective {name} ({evaluated} layouts evaluated, the rest bounded out)", ""]
    head = ("job", "workers", "RTT us", "elements", "group", "slots", "predicted", "equal split slots", "equal split",
            "gain")
    rows = []
    for a, b in zip(split.jobs, equal.jobs):
        wl = a.job.workload
        rows.append([a.job.name, str(wl.workers), f"{wl.rtt_us:g}", str(wl.elements), str(a.group),
                     f"{a.slot_base}+{a.slot_count}", f"{a.time_s * 1e3:.3f} ms", f"{b.slot_base}+{b.slot_count}",
                     f"{b.time_s * 1e3:.3f} ms", f"{100 * (b.time_s - a.time_s) / b.time_s:.1f}%"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    lines += ["", f"{name}: {split.value * 1e3:.3f} ms against {equal.value * 1e3:.3f} ms with an equal static split "
                  f"of the same layout's slots ({gain:.1f}% lower)"]
    return "\n".join(lines)
