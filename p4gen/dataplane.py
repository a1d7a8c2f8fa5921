"""``python -m p4gen.dataplane``: kept as the data plane's entry point.

The data plane lives in :mod:`p4gen.switch.dataplane`; this module imports
it only when run as a program, so the compiler package stays free of the
switch runtime.
"""

if __name__ == "__main__":
    from p4gen.switch.dataplane import main

    raise SystemExit(main())
