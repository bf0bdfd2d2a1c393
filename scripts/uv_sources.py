"""Print uv's flags for the package sources pip is configured with (`make setup`): its index, extra indexes,
find-links folders and constraint files, from `pip config list` and the PIP_* environment variables, so that
`uv pip install` reads the lock from exactly where pip would (on this kind of machine: wheels on disk).

Standard library only: it runs before the venv holds anything but pip.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

# pip's option -> uv's flag; pip considers every index for the best match, and so does uv with this strategy
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}


def pip_settings(config_list: str, environ: dict) -> dict[str, list[str]]:
    """{pip option: values} from `pip config list` lines ('global.find-links='/opt/wheels'', ':env:.x=...') with
    the PIP_FIND_LINKS-style variables on top, as pip reads them (space-separated lists)."""
    settings: dict[str, list[str]] = {}
    for line in config_list.splitlines():
        key, _, value = line.partition("=")
        option = key.rpartition(".")[2]
        if option in OPTIONS and value:
            settings[option] = value.strip().strip("'\"").split()
    for option in OPTIONS:
        variable = "PIP_" + option.upper().replace("-", "_")
        if environ.get(variable):
            settings[option] = environ[variable].split()
    return settings


def uv_flags(settings: dict[str, list[str]]) -> list[str]:
    flags = [part for option, values in settings.items() for value in values for part in (OPTIONS[option], value)]
    return flags + ["--index-strategy", "unsafe-best-match"]


if __name__ == "__main__":
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    print(shlex.join(uv_flags(pip_settings(listed, dict(os.environ)))))
