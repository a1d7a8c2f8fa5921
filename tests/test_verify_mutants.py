"""Every seeded mutant is refuted by a concrete trace from the initial state."""

import pytest

from p4gen import decision
from p4gen.verify import protocol
from p4gen.verify.mutants import CATALOGUE, mutant_config


def test_catalogue_size():
    assert len(CATALOGUE) >= 7
    for m in CATALOGUE:
        decision.validate(mutant_config(m, 2).table)


@pytest.mark.parametrize("mutant", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_mutant_refuted(mutant):
    cfg = mutant_config(mutant, 2)
    cex = protocol.bmc(cfg, 12)
    assert cex is not None, f"{mutant.name} not refuted"
    text = "\n".join(cex.format())
    assert "violates" in text and cex.steps >= 1
