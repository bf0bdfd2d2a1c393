"""What one GRPO training job imports of the package, in both of its processes: Snakemake's and the job's own.

Retrains ``results/runs/grpo`` of a finished run for one step (``COMMAND``: use a copy of a run you want to keep) with
a ``sitecustomize`` on PYTHONPATH that records each process's ``sys.modules`` as it exits, then prints the
``thai_grpo`` modules with their lines (``wc -l``, and of those the lines of code: not blank, a comment or a docstring)
for Snakemake's process, the job's, and the union of the two."""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "thai_grpo"
JOB_SCRIPT = "train.py"
COMMAND = ["snakemake", "--cores", "1", "results/runs/grpo/adapter", "--forcerun", "train",
           "--config", 'grpo={"max_steps": 1, "save_steps": 1}']
# Written into a folder on PYTHONPATH: every Python process started below imports it first. A job ends through
# os._exit (no atexit), so that exit writes the record too.
HOOK = '''
import atexit, json, os, sys

def _write_modules(*_):
    files = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())}
    path = os.path.join(os.environ["IMPORT_WEIGHT_DIR"], f"{os.getpid()}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"argv": sys.argv, "modules": files}, handle, default=str)

_exit = os._exit

def _exit_recorded(code):
    _write_modules()
    _exit(code)

os._exit = _exit_recorded
atexit.register(_write_modules)
'''


def code_lines(source: str) -> int:
    """The lines of ``source`` that are not blank, a comment or part of a module's, class's or function's docstring."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ast.get_docstring(node, clean=False) is not None:
            docstrings.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.lstrip().startswith("#") and number not in docstrings)


def package_modules(modules: dict[str, str | None], package: str = PACKAGE) -> dict[str, tuple[int, int]]:
    """The ``package`` modules of one process's ``sys.modules`` (name -> file), each with (``wc -l``, code lines)."""
    sources = {name: Path(path).read_text(encoding="utf-8") for name, path in sorted(modules.items())
               if (name == package or name.startswith(package + ".")) and path}
    return {name: (source.count("\n"), code_lines(source)) for name, source in sources.items()}


def process_role(argv: list[str]) -> str:
    """``snakemake``, ``job`` (the copy of scripts/train.py Snakemake runs from .snakemake/scripts/) or ``other``."""
    if argv and Path(argv[0]).name == "snakemake":
        return "snakemake"
    scripts = [arg for arg in argv if ".snakemake/scripts/" in arg.replace(os.sep, "/")]
    return "job" if any(arg.endswith(JOB_SCRIPT) for arg in scripts) else "other"


def weigh(records: list[dict], package: str = PACKAGE) -> dict[str, dict[str, tuple[int, int]]]:
    """{"snakemake": modules, "job": modules, "union": modules} from the processes' records (``HOOK``'s files)."""
    weights: dict[str, dict[str, tuple[int, int]]] = {"snakemake": {}, "job": {}}
    for record in records:
        role = process_role(record["argv"])
        if role in weights:
            weights[role].update(package_modules(record["modules"], package))
    weights["union"] = {**weights["snakemake"], **weights["job"]}
    return weights


def report(weights: dict[str, dict[str, tuple[int, int]]]) -> str:
    """Per process, its modules with their lines and lines of code, then its count and totals; the union's last."""
    lines = []
    for role, modules in weights.items():
        total, code = (sum(counts[i] for counts in modules.values()) for i in (0, 1))
        lines.append(f"{role}: {len(modules)} modules, {total} lines ({code} of code)")
        lines += [f"  {wc:5d} {code_:5d}  {name}" for name, (wc, code_) in sorted(modules.items())]
    return "\n".join(lines)


def measure(command: list[str] = COMMAND, cwd: str | Path = ".") -> dict[str, dict[str, tuple[int, int]]]:
    """Run ``command`` with ``HOOK`` on PYTHONPATH and weigh what its processes imported."""
    with tempfile.TemporaryDirectory() as hook_dir, tempfile.TemporaryDirectory() as out_dir:
        Path(hook_dir, "sitecustomize.py").write_text(HOOK, encoding="utf-8")
        env = {**os.environ, "IMPORT_WEIGHT_DIR": out_dir,
               "PYTHONPATH": os.pathsep.join(filter(None, [hook_dir, os.environ.get("PYTHONPATH")]))}
        subprocess.run(command, cwd=cwd, env=env, check=True)
        records = [json.loads(path.read_text(encoding="utf-8")) for path in sorted(Path(out_dir).glob("*.json"))]
    return weigh(records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directory", default=".", help="the checkout whose finished results/ is measured")
    parser.add_argument("--snakemake", default=str(Path(sys.executable).with_name("snakemake")),
                        help="the snakemake command (default: the one beside this Python)")
    args = parser.parse_args(argv)
    print(report(measure([args.snakemake, *COMMAND[1:]], args.directory)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
