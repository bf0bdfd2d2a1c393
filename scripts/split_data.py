"""Stage 2: integer gold answers, one seeded shuffle, held-out / GRPO / SFT / pretraining sets disjoint in text
and skeleton (rows sharing a held-out skeleton are set aside, counted as ``reserved``)."""

from thai_grpo.core.io import log_to, read_jsonl, write_json, write_jsonl
from thai_grpo.data.problems import assert_no_leakage, deduplicate, normalize_rows, split_rows

log_to(snakemake.log[0])
data = snakemake.params.data
records = read_jsonl(snakemake.input.rows)
rows, dropped = normalize_rows(records, data["question_column"], data["answer_column"])
unique = deduplicate(rows)
sft_size = data["sft_size"] if snakemake.params.train_sft else 0
splits = split_rows(unique, data["shuffle_seed"], data["train_size"], data["heldout_size"], sft_size)
reserved = splits.pop("reserved")
assert_no_leakage(splits["heldout"], train=splits["train"], sft=splits["sft"], pretrain=splits["pretrain"])

for name, part in splits.items():
    write_jsonl(snakemake.output[name], part)
stats = {"source_rows": len(records), "dropped_unparseable": dropped, "duplicates_removed": len(rows) - len(unique),
         "reserved_for_heldout_skeletons": len(reserved),
         "heldout_skeletons": len({r["skeleton"] for r in splits["heldout"] if r.get("skeleton")}),
         "leakage_check": "text hash and skeleton" if any(r.get("skeleton") for r in unique) else "text hash",
         **{f"{name}_size": len(part) for name, part in splits.items()}}
print(stats)
write_json(snakemake.output.stats, stats)
