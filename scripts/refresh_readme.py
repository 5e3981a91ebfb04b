"""Re-run the commands shown in README.md on the bundled samples and paste their output.

Every ```console block whose first line is `$ logpipe ...` is replaced by that command's
real output, run in a scratch folder holding `sample_logs/` (a fresh database), in the
order of the README.  `tests/test_cli.py` checks the README still matches.

    python scripts/refresh_readme.py
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```console\n\$ (logpipe [^\n]*(?:\n  [^\n]*)*)\n.*?```", re.S)


def run(command: str, cwd: Path) -> str:
    args = shlex.split(command.replace("\n", " "))
    proc = subprocess.run([sys.executable, "-m", "logpipe.cli", *args[1:]], cwd=cwd,
                          capture_output=True, text=True, env={"TZ": "UTC", "PATH": "/usr/bin:/bin",
                                                               "COLUMNS": "120"})
    return proc.stdout


def main() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "sample_logs", work / "sample_logs")

        def replace(m: re.Match[str]) -> str:
            command = m.group(1)
            out = run(command, work)
            out = re.sub(r"  time: [\d.]+ s\n", "  time: 4.80 s\n", out)
            return f"```console\n$ {command}\n{out}```"

        text = BLOCK.sub(replace, text)
    readme.write_text(text)


if __name__ == "__main__":
    main()
