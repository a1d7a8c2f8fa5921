"""`p4gen build --compile` for Tofino: the compiler it runs, what a refusal leaves, and the report's
predicted / allocated table.

The command line, the kept log, the version line and the one-line error are checked with a stand-in
compiler (a shell script on PATH); bench/tofino.py runs the real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from p4gen import tofino_compiler as tc
from p4gen.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("P4GEN_CACHE_DIR", str(tmp_path / "cache"))


def _stand_in(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "bin" / "p4c-barefoot"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'p4c-barefoot'; echo 'Version 9.9'; exit 0; fi\n"
                   f"echo \"$@\" > {tmp_path / 'argv'}\n" + body)
    exe.chmod(0o755)
    return exe


def test_a_refusal_is_one_line_and_the_whole_log_stays_in_the_build(tmp_path, monkeypatch, capsys):
    _stand_in(tmp_path, "echo 'p4c-barefoot: warning: nothing'\n"
                        "echo 'program.p4(87): error: RegisterAction chunk_advance_window: too many comparisons' >&2\n"
                        "echo 'program.p4(99): error: the second error' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    out = tmp_path / "o"
    assert main(["build", "--target", "tofino2", "--slots", "64", "--compile", "--out", str(out)]) == 1
    started, err = capsys.readouterr().err.splitlines()
    assert started.startswith("build +") and started.endswith(" s: compiling program.p4 for tofino2 with p4c-barefoot: "
                                                             "stages, stateful ALUs, SRAM and PHV as allocated on the "
                                                             "chip, beside p4gen's prediction")
    assert err == ("p4gen: error: p4c-barefoot rejected program.p4: program.p4(87): error: RegisterAction "
                   f"chunk_advance_window: too many comparisons; the whole log is {out / 'compile.log'}")
    log = (out / "compile.log").read_text()
    assert "the second error" in log and "exit status 1" in log
    assert (out / "program.p4").is_file() and (out / "plan.json").is_file()
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:5] == ["--target", "tofino2", "--arch", "t2na", "-g"] and argv[-1] == "program.p4"
    # a refused compile is not cached: the next build runs the compiler again
    (tmp_path / "argv").unlink()
    assert main(["build", "--target", "tofino2", "--slots", "64", "--compile", "--out", str(out)]) == 1
    assert (tmp_path / "argv").exists()


def test_the_version_names_the_compiler_and_its_version_line(tmp_path):
    exe = _stand_in(tmp_path, "exit 0\n")
    assert tc.version(str(exe)) == "p4c-barefoot Version 9.9"


def test_a_compile_without_resource_logs_is_refused(tmp_path, monkeypatch, capsys):
    _stand_in(tmp_path, "exit 0\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert main(["build", "--target", "tofino", "--slots", "64", "--compile", "--out", str(tmp_path / "o")]) == 1
    assert "wrote no logs/resources.json and logs/phv.json" in capsys.readouterr().err


def test_first_error_takes_the_message_after_a_bare_location():
    assert tc.first_error("warning: x\nprogram.p4(3): error:\n  Too much data for parse matcher\nmore\n") == \
        "program.p4(3): error: Too much data for parse matcher"
    assert tc.first_error("") == "no output"


_LOGS = r"""out=out; mkdir -p $out/pipe/logs
echo '{"resources":{"mau":{"nStages":12,"mau_stages":[{"stage_number":0,"rams":{"srams":[{"row":0,"column":2,"usages":[{"used_by":"P4genIngress.workers","used_for":"match"}]}]},"hash_bits":{"bits":[{"hash_bit":0},{"hash_bit":1}]}},{"stage_number":3,"rams":{"srams":[{"row":1,"column":2,"usages":[{"used_by":"P4genIngress.chunk","used_for":"stateful_ram"}]},{"row":1,"column":3,"usages":[{"used_by":"P4genIngress.chunk","used_for":"stateful_ram"}]}]},"meter_alus":{"meters":[{"row":1,"usages":[{"used_by":"P4genIngress.chunk","used_for":"stateful_ram"}]}]},"tcams":{"tcams":[{"row":0,"column":0,"usages":[]}]}}]}}}' > $out/pipe/logs/resources.json
echo '{"containers":[{"bit_width":32,"container_type":"normal","slices":[{"field_slice":{"field_name":"hdr.agg.tsi","slice_info":{"lsb":0,"msb":31}}}]},{"bit_width":32,"container_type":"normal","slices":[{"field_slice":{"field_name":"meta.vidx","slice_info":{"lsb":0,"msb":31}}}]},{"bit_width":32,"container_type":"normal","slices":[{"field_slice":{"field_name":"meta.mask0","slice_info":{"lsb":0,"msb":25}}}]},{"bit_width":32,"container_type":"normal","slices":[]},{"bit_width":8,"container_type":"normal","slices":[{"field_slice":{"field_name":"meta.cmp","slice_info":{"lsb":0,"msb":7}}}]},{"bit_width":8,"container_type":"tagalong","slices":[{"field_slice":{"field_name":"meta.known","slice_info":{"lsb":0,"msb":0}}}]}]}' > $out/pipe/logs/phv.json
"""


def test_a_compiled_build_reports_what_was_allocated_beside_the_prediction(tmp_path, monkeypatch, capsys):
    _stand_in(tmp_path, _LOGS)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    out = tmp_path / "o"
    assert main(["build", "--target", "tofino", "--slots", "64", "--compile", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "  checked by p4c-barefoot Version 9.9: stages, stateful ALUs, SRAM and PHV as allocated on the chip, "
        "beside p4gen's prediction")
    text = (out / "report.txt").read_text()
    assert "  predicted    the figures above are p4gen's model; the compiler's allocation is below\n" in text
    assert "  compiled by  p4c-barefoot Version 9.9; its log is compile.log" in text
    rows = {ln[2:16].strip(): ln[16:].split() for ln in text.splitlines()[-40:] if ln.startswith("  ") and len(ln) > 16}
    assert rows["stages"][1] == "4" and rows["stateful ALUs"][1] == "1" and rows["SRAM registers"][1] == "2"
    assert rows["SRAM all"] == ["-", "3"]
    assert rows["TCAM blocks"] == ["-", "1"] and rows["PHV bits"][1] == "99" and rows["hash bits"] == ["-", "2"]
    assert "  PHV containers 8b 1, 32b 3, 8b tagalong 1" in text       # the empty container is not counted
    assert "        chunk 3" in text and "bitmap0 -" in text        # chunk landed in stage 3; bitmap0 not in the logs
    assert (out / "compiler-resources.json").is_file() and (out / "compiler-phv.json").is_file()
