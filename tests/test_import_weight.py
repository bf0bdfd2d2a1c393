"""thai_grpo_tools.import_weight: which process is which, and the package lines each imported."""

import subprocess
import sys

from thai_grpo_tools.import_weight import HOOK, code_lines, package_modules, process_role, report, weigh


def test_processes_are_told_apart_by_their_command_line():
    assert process_role(["/venv/bin/snakemake", "--cores", "1"]) == "snakemake"
    assert process_role(["python", "/repo/.snakemake/scripts/tmpab12.train.py"]) == "job"
    assert process_role(["python", "/repo/.snakemake/scripts/tmpab12.split.py"]) == "other"
    assert process_role(["-c"]) == "other"


def test_the_union_counts_a_module_both_processes_import_once(tmp_path):
    files = {}
    for name, lines in (("a", 3), ("b", 5), ("c", 7)):
        files[name] = tmp_path / f"{name}.py"
        files[name].write_text("x = 1\n" * lines)
    snakemake = {"argv": ["snakemake"], "modules": {"pkg.a": str(files["a"]), "pkg.b": str(files["b"]),
                                                    "json": None, "other.c": str(files["c"])}}
    job = {"argv": ["python", ".snakemake/scripts/tmp.train.py"], "modules": {"pkg.b": str(files["b"])}}
    assert package_modules(snakemake["modules"], "pkg") == {"pkg.a": (3, 3), "pkg.b": (5, 5)}
    weights = weigh([snakemake, job], "pkg")
    assert weights["job"] == {"pkg.b": (5, 5)} and sum(wc for wc, _ in weights["union"].values()) == 8
    assert report(weights).splitlines()[-3] == "union: 2 modules, 8 lines (8 of code)"


def test_code_lines_leave_out_blank_lines_comments_and_docstrings_but_not_other_strings():
    source = ('"""A module.\n\nIts docstring."""\n\n# a comment\nimport os  # code\n\n\n'
              'def f():\n    """One line."""\n    return """not a\ndocstring"""\n\n\n'
              'class C:\n    x = 1\n')
    assert source.count("\n") == 16 and code_lines(source) == 6  # import, def, the return's two lines, class, x


def test_the_hook_records_a_process_that_ends_through_os_exit(tmp_path):
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(HOOK)
    env = {"PYTHONPATH": str(tmp_path / "hook"), "IMPORT_WEIGHT_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", "import os, json; os._exit(0)"], env=env, check=True)
    records = list(tmp_path.glob("*.json"))
    assert len(records) == 1 and "json" in records[0].read_text()
