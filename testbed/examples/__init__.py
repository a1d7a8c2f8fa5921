"""Short Mininet scripts to copy and edit; each runs as ``python -m p4gen.testbed.examples.<name>`` (root)."""
