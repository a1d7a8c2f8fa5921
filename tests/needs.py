"""Skip a whole test module, at collection, when an optional dependency it imports is missing.

Call before the imports that need it, so a checkout installed without that extra collects the
module as skipped (with the one line :func:`p4gen.extras.lacking` gives), never as an error::

    from needs import modules
    modules("the testbed", "mininet")
    from p4gen.testbed.nodes import SoftSwitch  # noqa: E402
"""

from __future__ import annotations

import pytest

from p4gen.extras import lacking


def modules(what: str, *names: str) -> None:
    why = lacking(what, *names)
    if why:
        pytest.skip(why, allow_module_level=True)
