"""The subprocess harness of the Triton-interpreter tests fails a run that executed nothing: an
exit code of 0 alone proves nothing (a module whose tests all skip, a script that stops early)."""

from __future__ import annotations

import pytest

from evalkit.kernels.testing import run_json_script, run_module_under_interpreter


def test_a_script_reporting_what_it_executed_passes():
    out = run_json_script('import json; print(json.dumps({"executed": ["one check"], "x": 1}))')
    assert out == {"executed": ["one check"], "x": 1}


@pytest.mark.parametrize(
    "code",
    [
        "pass",  # exit 0, no result
        'import json; print(json.dumps({"executed": []}))',  # ran, executed nothing
        'import json; print(json.dumps({"x": 1}))',  # does not say what it executed
        'import json, sys; print(json.dumps({"executed": ["a"]})); sys.exit(3)',  # failed
    ],
)
def test_a_script_that_executed_nothing_or_failed_fails(code):
    with pytest.raises(AssertionError):
        run_json_script(code, interpret=False)


def test_a_module_whose_tests_all_skip_fails(tmp_path):
    module = tmp_path / "test_skipped.py"
    module.write_text("import pytest\n\n\ndef test_x():\n    pytest.skip('nothing here')\n")
    rc, out = run_module_under_interpreter(str(module), timeout=120)
    assert rc != 0 and "no test executed" in out
