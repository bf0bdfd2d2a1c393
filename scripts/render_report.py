"""Stage 7b: one self-contained HTML page from the results, figures and a few escaped samples."""

from pathlib import Path

from thai_grpo.core.io import read_json, read_jsonl
from thai_grpo.jobs.job import log_to
from thai_grpo.report.html import write_report
from thai_grpo.report.results import add_studies, elapsed_seconds

log_to(snakemake.log[0])
results = read_json(snakemake.input.results)
# The optional targets' results, where built (rules/common.smk OPTIONAL_RESULTS): params of the main report (path and
# digest), an input of a study's own report (report_seeds).
studies = {name: study["path"] for name, study in snakemake.params.get("studies", {}).items()}
studies.update({name: snakemake.input[name] for name in ("seeds", "passk", "hacking", "losses", "chains")
                if snakemake.input.get(name)})
add_studies(results, {name: read_json(path) for name, path in studies.items()},
            snakemake.params.get("settings_fingerprint"))
run = results.setdefault("run", {})  # elapsed: first job start to last job end, beside the summed job time
run["elapsed_seconds"] = elapsed_seconds(snakemake.params.benchmarks, run.get("benchmarks") or {})
samples = {model: read_jsonl(path) for model, path in zip(snakemake.params.models, snakemake.input.samples)}
write_report(results, samples, Path(snakemake.input.figures),
             Path(snakemake.input.template).parent, snakemake.output.html)
