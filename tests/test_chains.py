"""The chain study's DAG (rules/chains.smk): each chain seed other than the config's own is the whole workflow loaded
again as a Snakemake module, its files under results/chains/seed<N>/, on the smoke config (dry-runs only)."""

import pytest
from workflow import copy_workflow, run_snakemake, scheduled_jobs

CHAINS = ["--configfile", "config/smoke.yaml", "--config", "chains={'seeds': [42, 7]}"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("chains"))


def test_each_other_chain_rebuilds_the_whole_comparison_and_the_config_seed_is_the_main_run(workdir):
    jobs = scheduled_jobs(run_snakemake(workdir, "chains", "-n", *CHAINS))
    for stage in ("base_model", "sft_adapter", "train", "sample", "score", "hacking_results"):
        assert jobs[f"chain_seed7_{stage}"] == jobs[stage], stage  # chain 7 repeats every stage of the main chain
    assert not any(rule.startswith("chain_seed42_") for rule in jobs)  # seed 42 is the config's: results/ itself
    assert jobs["chain_results"] == 1 and "report" not in jobs and "chain_seed7_report" not in jobs


def test_a_chains_files_live_under_its_own_folder(workdir):
    summary = run_snakemake(workdir, "chains", "--summary", *CHAINS)
    assert summary.returncode == 0, summary.stderr[-3000:]
    rows = [line.split("\t") for line in summary.stdout.splitlines()[1:] if "\t" in line]
    chain_files = [path for path, _, rule, *_ in rows if rule.startswith("chain_seed7_")]
    assert "results/chains/seed7/model/base" in chain_files and "results/chains/seed7/runs/grpo/adapter" in chain_files
    assert all(path.startswith("results/chains/seed7/") for path in chain_files)
    assert not any(path.startswith("results/chains/seed7/") for path, _, rule, *_ in rows
                   if not rule.startswith("chain_seed7_"))


def test_a_chain_study_needs_two_chains(workdir):
    done = run_snakemake(workdir, "chains", "-n", "--configfile", "config/smoke.yaml", "--config",
                         "chains={'seeds': [42]}")
    assert done.returncode != 0 and "seeds" in (done.stdout + done.stderr)


def test_every_other_chain_samples_with_its_own_seed(workdir):
    """The chain module's config carries the chain's own eval.seed (thai_grpo.core.seeds.chain_sampling_seed); the
    config's chain (results/) keeps eval.seed: probed from the modules Snakemake loaded."""
    import ast

    from thai_grpo.core.seeds import chain_sampling_seed

    (workdir / "probe.smk").write_text('include: "Snakefile"\nprint("PROBE", {name: (info.config["eval"]["seed"], '
                                       'config["eval"]["seed"]) for name, info in workflow.modules.items()})\n')
    done = run_snakemake(workdir, "chains", "-n", "-s", "probe.smk", *CHAINS)
    line = next(line for line in (done.stdout + done.stderr).splitlines() if line.startswith("PROBE"))
    (chain, main), = ast.literal_eval(line.removeprefix("PROBE ")).values()
    assert chain == chain_sampling_seed(main, 7, 42) != main
