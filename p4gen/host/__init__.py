"""The host side: what a training worker runs next to the switch.

Public API (imported on first use):

* ``p4gen.host.codec`` -- the block floating-point codec (quantize,
  dequantize, error bound);
* :class:`Endpoint`, :func:`endpoint`, :func:`contribution_frame`,
  :func:`parse_result`, :class:`Result` -- worker frames
  (``p4gen.host.packet``); OmniReduce frames are :class:`OmniFrames`
  (``p4gen.host.omni_packet``);
* :class:`Worker`, :class:`WorkerError` (``p4gen.host.worker``) and
  :class:`OmniWorker` (``p4gen.host.omni_worker``) -- the pure worker
  state machines; :class:`FastWorker` (``p4gen.host.fastworker``) is the
  same protocol with the per-packet work compiled, byte for byte the same.

This package reads the compiler's output (``p4gen.plan``, ``p4gen.wire``)
and never the switch runtime.
"""

from importlib import import_module

_EXPORTS = {
    "Endpoint": "packet", "endpoint": "packet", "contribution_frame": "packet", "parse_result": "packet",
    "parse_contribution": "packet", "Result": "packet",
    "OmniFrames": "omni_packet",
    "Worker": "worker", "WorkerError": "worker", "WorkerStats": "worker",
    "FastWorker": "fastworker",
    "OmniWorker": "omni_worker", "OmniProtocolError": "omni_worker",
}
__all__ = sorted(_EXPORTS) + ["codec"]


def __getattr__(name: str):
    if name == "codec":
        return import_module(".codec", __name__)
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
