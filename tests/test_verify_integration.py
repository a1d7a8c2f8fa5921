"""`p4gen verify` runs the proofs that belong to the build's protocol."""

from __future__ import annotations

import pytest

from p4gen.cli import main


@pytest.mark.slow
def test_verify_on_an_omnireduce_build_runs_the_omnireduce_model(tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["build", "--protocol", "omnireduce", "--target", "bmv2", "--slots", "16", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--workers", "2", "--jobs", "2"]) == 0
    text = capsys.readouterr().out
    for prop in ("exact_result", "min_next", "copy_reuse", "retransmission_harmless"):
        assert any(line.startswith(f"omnireduce/{prop} ") and " proved " in line for line in text.splitlines()), prop
    assert "protocol/" not in text          # the SwitchML slot model does not apply to this table
    assert (out / "verify.json").is_file()
