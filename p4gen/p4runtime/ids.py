"""P4Runtime's IDs of a table's match fields and an action's parameters, defined once.

A P4Info numbers a table's match fields and an action's parameters 1, 2, ... in the order the Plan lists
them, each beside its name.  The P4Info emitter writes these IDs, and the switch's P4Runtime server and
the controller encode and decode entries with them: every one of them goes through this module, so a
field is always found by its ID's own name, and an ID that names nothing is None (never another field).
"""

from __future__ import annotations

from typing import Any, Iterator


def numbered(fields) -> Iterator[tuple[int, Any]]:
    """(ID, field) of a table's keys or an action's parameters, as the P4Info lists them."""
    return enumerate(fields, start=1)


def by_id(fields, fid: int):
    """The key or parameter with P4Runtime ID ``fid`` among ``fields``, or None when there is none."""
    return fields[fid - 1] if isinstance(fid, int) and 1 <= fid <= len(fields) else None
