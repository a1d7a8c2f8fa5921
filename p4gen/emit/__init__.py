"""Emitters: a Plan rendered as P4_16 (``p4``, through the Jinja templates listed by ``templates``),
P4Info (``p4info``) and the resource report (``report``)."""
