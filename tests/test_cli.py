import subprocess
import sys


def test_cli_lists_every_subcommand():
    out = subprocess.run([sys.executable, "-m", "evalkit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for name in ("run", "compare", "drift", "serve", "tasks", "verify-kernels"):
        assert name in out.stdout


def test_cli_without_command_is_an_error():
    out = subprocess.run([sys.executable, "-m", "evalkit"], capture_output=True, text=True)
    assert out.returncode == 2
