"""Stage 1: the source rows in the real dataset's schema (synthetic offline, hub or local otherwise)."""

from thai_grpo.core.io import write_jsonl
from thai_grpo.jobs.job import log_to
from thai_grpo.data.problems import DataSource, load_source_dataset
from thai_grpo.data.synthetic import generate_problems

log_to(snakemake.log[0])
data = snakemake.params.data
if data["source"] == "synthetic":
    synthetic = data["synthetic"]
    rows = generate_problems(synthetic["num_problems"], synthetic["seed"], max_operand=synthetic["max_operand"],
                             two_step_fraction=synthetic["two_step_fraction"])
else:
    hub = data["hub"]
    source = DataSource(data["source"], data["question_column"], data["answer_column"],
                        path=hub["path"] if data["source"] == "hub" else data["local_path"],
                        revision=hub["revision"], split=hub["split"])
    rows = load_source_dataset(source).to_list()
print(f"{len(rows)} rows from source={data['source']}")
write_jsonl(snakemake.output.rows, rows)
