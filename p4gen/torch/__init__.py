"""p4gen.torch: train with PyTorch DDP, gradients aggregated by the switch.

Three lines in an existing DDP script::

    import p4gen.torch
    model = torch.nn.parallel.DistributedDataParallel(model)
    hook = p4gen.torch.register(model, switch="10.0.0.254", plan="build/bmv2", job="job.toml")

then ``hook.step(optimizer)`` where the script had ``optimizer.step()``
(it skips the step of an iteration whose gradients held NaN or Inf on any
worker).  Public API:

* :func:`register` and :class:`Hook` (``p4gen.torch.hook``): the DDP
  communication hook, optionally with per-bucket optimiser updates;
* :class:`Session`, :class:`Member` (``p4gen.torch.session``): one worker's
  all-reduce service over UDP, usable without DDP;
* :class:`TorchHookError`, :class:`SwitchLostError`.

Needs the ``torch`` extra (``pip install 'p4gen[torch]'``).
"""

from importlib import import_module

_EXPORTS = {
    "register": "hook", "Hook": "hook",
    "Session": "session", "Member": "session", "member_from_job": "session",
    "TorchHookError": "session", "SwitchLostError": "session",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        from ..extras import lacking

        why = lacking("p4gen.torch", "torch")
        if why:
            raise ImportError(why)
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
