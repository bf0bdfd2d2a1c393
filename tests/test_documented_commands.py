"""Every command the user's guide shows works as written: each line of the ```bash blocks of README.md, docs/*.md,
config/README.md and CONTRIBUTING.md is run as far as a test can run it, and each ```yaml block is a valid config.

- `make TARGET [VAR=value]`: `make -n` in the repository (the target exists, its recipe resolves);
- `snakemake ...`: the same words as a dry-run in a scratch copy of the workflow, as Snakemake resolves them with the
  workflow's profiles; a command of the real config also on a machine that reports one GPU (a stand-in
  `nvidia-smi`), where Snakemake's own scheduler, replayed over the whole DAG, must never run two GPU jobs at once;
- `.venv/bin/python scripts/...`: run for real, on a results folder holding the shipped tiny base and SFT adapter;
- `cp ...`: run for real in a scratch folder that holds a results/;
- `source .venv/bin/activate`: the venv the Makefile builds.

A command of any other kind fails the test until it is taught here: nothing is skipped silently."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake_dry_run import dry_run, fake_nvidia_smi, install
from workflow import OFFLINE_ENV, REPO, copy_workflow

from thai_grpo.workflow import check_config, load_config_files
from thai_grpo.core.io import write_jsonl

GUIDE = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "config/README.md", REPO / "CONTRIBUTING.md"]
REAL_CONFIG = "config/qwen3-0.6b.yaml"


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def shell_commands(block: str) -> list[str]:
    """The commands of one shell block: `\\`-continued lines joined, comments cut, `a && b` split into a and b."""
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in joined.splitlines():
        line = re.split(r"(?:^|\s)#(?:\s|$)", line, maxsplit=1)[0].strip()
        commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def documented_commands(paths=GUIDE) -> list[tuple[str, str]]:
    """(document, command) for every command of every ```bash block of ``paths``, in order, each once."""
    found = []
    for path in paths:
        for block in fenced_blocks(path.read_text(encoding="utf-8"), "bash"):
            name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
            found += [(name, command) for command in shell_commands(block)]
    return list(dict.fromkeys(found))


def gpu_jobs_together(replay: dict) -> list[list[str]]:
    """The sets of jobs that Snakemake's scheduler ran side by side holding more than one GPU between them."""
    gpus = {job: resources.get("gpu", 0) or 0 for job, resources in replay["resources"].items()}
    return [group for group in replay["together"] if sum(gpus.get(job, 0) for job in group) > 1]


def check_snakemake(words: list[str], workdir: Path, gpu_machine: Path) -> str | None:
    """Why the snakemake command ``words`` fails (None when it works): its dry-run is refused, or on a one-GPU machine
    it would co-schedule two GPU jobs."""
    args = [w for w in words[1:] if w not in ("-n", "--dry-run")]
    done, _ = dry_run(workdir, *args)
    if done.returncode != 0:
        return f"refused as a dry-run:\n{(done.stdout + done.stderr)[-1500:]}"
    if REAL_CONFIG in words and "--workflow-profile" not in words:  # a local run of the real model: one GPU at a time
        done, seen = dry_run(workdir, *args, env=fake_nvidia_smi(gpu_machine, gpus=1))
        if done.returncode != 0 or seen["replay"] is None:
            return f"refused on a one-GPU machine:\n{(done.stdout + done.stderr)[-1500:]}"
        clashes = gpu_jobs_together(seen["replay"])
        if clashes:
            return f"runs GPU jobs side by side on one GPU: {clashes[0]}"
    return None


def check_make(words: list[str]) -> str | None:
    done = subprocess.run(["make", "-n", *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=120)
    return None if done.returncode == 0 else f"`make -n` refused it:\n{(done.stdout + done.stderr)[-1500:]}"


def check_script(words: list[str], results_home: Path) -> str | None:
    """The script run for real (``.venv/bin/python`` is the running interpreter) in a folder with a results/."""
    assert words[0] == ".venv/bin/python", words
    env = {**os.environ, **OFFLINE_ENV, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, *words[1:]], cwd=results_home, env=env, capture_output=True, text=True,
                          timeout=300)
    return None if done.returncode == 0 else f"exit {done.returncode}:\n{(done.stdout + done.stderr)[-1500:]}"


def check_shell(words: list[str], results_home: Path) -> str | None:
    done = subprocess.run(words, cwd=results_home, capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()}"


@functools.cache  # a command several documents show is checked once
def check_command(command: str, workdir: Path, results_home: Path) -> str | None:
    """Why ``command`` does not work as documented, or None."""
    words = shlex.split(command)
    if words[0] == "make":
        return check_make(words)
    if words[0] == "snakemake":
        return check_snakemake(words, workdir, workdir.parent / "one-gpu")
    if words[0] == ".venv/bin/python" and len(words) > 1 and words[1].startswith("scripts/"):
        return check_script(words, results_home)
    if words[0] == "cp":
        return check_shell(words, results_home)
    if command == "source .venv/bin/activate":
        return None if "VENV := .venv" in (REPO / "Makefile").read_text(encoding="utf-8") else "no .venv in Makefile"
    return "no check known for this kind of command: teach tests/test_documented_commands.py one"


def results_with_the_shipped_models(home: Path) -> Path:
    """``home`` as a finished run leaves it for scripts/prompt.py: the shipped base as results/model/base, its SFT
    adapter as the SFT and GRPO adapters, a held-out set, and the workflow's config and scripts beside it."""
    copy_workflow(home)
    shipped = REPO / "assets/tiny-base"
    shutil.copytree(shipped / "base", home / "results/model/base")
    shutil.copytree(shipped / "sft_adapter", home / "results/model/sft_adapter")
    shutil.copytree(shipped / "sft_adapter", home / "results/runs/grpo/adapter")
    heldout = [{"question": f"มีส้ม {a} ผล ซื้อเพิ่มอีก {b} ผล มีส้มกี่ผล", "answer": a + b}
               for a, b in [(2, 3), (4, 1), (5, 5), (3, 6)]]
    write_jsonl(home / "results/data/heldout.jsonl", heldout)
    return home


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple[Path, Path]:
    workdir = copy_workflow(tmp_path_factory.mktemp("documented") / "workflow")
    install(workdir)
    return workdir, results_with_the_shipped_models(tmp_path_factory.mktemp("finished") / "run")


def test_the_guide_shows_the_commands_users_type():
    commands = {command for _, command in documented_commands()}
    assert {"make run", "make test", f"snakemake --cores 4 --configfile {REAL_CONFIG}"} <= commands
    assert len(commands) >= 25, sorted(commands)


@pytest.mark.parametrize("document", sorted({doc for doc, _ in documented_commands()}))
def test_every_documented_command_works_as_written(document, folders):
    workdir, results_home = folders
    failures = {command: why for doc, command in documented_commands() if doc == document
                for why in [check_command(command, workdir, results_home)] if why}
    assert not failures, f"{document}: " + "\n\n".join(f"`{c}`: {why}" for c, why in failures.items())


def test_every_documented_config_block_is_a_valid_config(tmp_path):
    blocks = [(path, block) for path in GUIDE for block in fenced_blocks(path.read_text(encoding="utf-8"), "yaml")]
    assert blocks
    for path, block in blocks:
        overrides = tmp_path / "block.yaml"
        overrides.write_text(block, encoding="utf-8")
        assert isinstance(yaml.safe_load(block), dict), path
        for base in (["config/config.yaml"], ["config/config.yaml", REAL_CONFIG]):
            config = load_config_files([REPO / p for p in base] + [overrides], schema=str(REPO / "config/schema.yaml"))
            check_config(config)


def test_a_broken_command_fails_the_check(folders, tmp_path):
    """The checks can fail: a misspelt target, a refused config, two GPU jobs on one GPU, a missing adapter, a
    command of no known kind."""
    workdir, results_home = folders
    guide = tmp_path / "guide.md"
    guide.write_text("```bash\nmake runn\nsnakemake --cores 1 --config 'grpo={\"beta\":-1}'\n"
                     f"snakemake --cores 4 --configfile {REAL_CONFIG} --resources gpu=2   # a second, imagined GPU\n"
                     ".venv/bin/python scripts/prompt.py --model nonesuch --heldout 3\nwget example.org\n```\n",
                     encoding="utf-8")
    commands = [command for _, command in documented_commands([guide])]
    assert len(commands) == 5
    why = {command.split()[0] + str(i): check_command(command, workdir, results_home)
           for i, command in enumerate(commands)}
    assert all(why.values()), why
    assert "side by side" in why["snakemake2"]
    assert "no check known" in why["wget4"]


def test_make_help_lists_every_target_with_its_line():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    phony = {t for line in re.findall(r"^\.PHONY:(.*)$", makefile, re.M) for t in line.split()}
    done = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    listed = {line.split()[0]: line.split(None, 1)[1] for line in done.stdout.splitlines() if line.strip()}
    assert done.returncode == 0 and phony <= set(listed), sorted(phony - set(listed))
    assert all(len(text) > 10 for text in listed.values()), listed
