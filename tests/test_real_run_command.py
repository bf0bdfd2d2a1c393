"""The real run is one command, and every document that gives it gives the same one: the workflow profile carries the
GPU limit (tests/test_profiles.py), so no command needs `--resources gpu=...` for it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL_RUN = "snakemake --cores 4 --configfile config/qwen3-0.6b.yaml"
DOCUMENTS = ["README.md", "docs/real-run.md", "config/README.md", "config/qwen3-0.6b.yaml", "scripts/gpu_check.sh"]


def real_config_commands(text: str) -> list[list[str]]:
    """Every `snakemake ... --configfile config/qwen3-0.6b.yaml ...` on one line of ``text``, as words (up to a
    closing backtick, a comment, or the line's end)."""
    found = re.findall(r"snakemake [^`#\n]*--configfile config/qwen3-0\.6b\.yaml[^`#\n]*", text)
    return [shlex.split(command.rstrip(" \\")) for command in found]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_document_gives_the_one_real_run_command(document):
    text = (REPO / document).read_text(encoding="utf-8")
    commands = real_config_commands(text)
    assert shlex.split(REAL_RUN) in commands, f"{document} does not give the real run as `{REAL_RUN}`"
    for words in commands:
        assert not any(word.startswith("--resources") for word in words), (document, words)
        plain = [w for w in words if w not in ("-n", "--dry-run")]
        if "--cores" in plain and len(plain) == 5:  # a whole real run: it must be the one command, word for word
            assert plain == shlex.split(REAL_RUN), (document, words)


def test_the_command_is_found_where_it_is_written_and_a_variant_is_caught():
    assert real_config_commands("run `snakemake --cores 4 --configfile config/qwen3-0.6b.yaml` here") == \
        [shlex.split(REAL_RUN)]
    variant = real_config_commands("#   snakemake --cores 1 --configfile config/qwen3-0.6b.yaml\n")
    assert variant == [["snakemake", "--cores", "1", "--configfile", "config/qwen3-0.6b.yaml"]]
    assert variant[0] != shlex.split(REAL_RUN)
