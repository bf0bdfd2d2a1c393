"""Stage 3a (offline): train a byte-level BPE tokenizer and pretrain a tiny Qwen3 from scratch."""

from thai_grpo.core.io import read_jsonl, write_json
from thai_grpo.data.corpus import arithmetic_drills, drill_texts, noisy_solutions, solution_facts
from thai_grpo.data.problems import sft_target
from thai_grpo.jobs.job import model_job
from thai_grpo.models.tiny_base import train_tokenizer
from thai_grpo.models.sft import pretrain_base

with model_job(snakemake):  # its log, its own GPU or the CPU (or a one-line stop), its threads; then a quick exit
    base, corpus, seed = snakemake.params.base, snakemake.params.corpus, snakemake.params.seed
    clean_rows = read_jsonl(snakemake.input.pretrain)
    pretrain_rows = noisy_solutions(clean_rows, corpus["pretrain_slip_rate"], corpus["seed"])
    sft_rows = read_jsonl(snakemake.input.sft)
    # plain text: the problem, then its solution in the <think> shape
    problems = [f"{r['question']}\n{sft_target(r['answer_text'], r['answer'])}" for r in pretrain_rows]
    # The drills: the operand table, plus every (correct) step of the pretraining solutions as an isolated fact.
    facts = set(arithmetic_drills(corpus["drill_max_operand"]))
    if corpus["drill_solution_steps"]:
        facts |= set(solution_facts([r["answer_text"] for r in clean_rows]))
    drills = drill_texts(sorted(facts), corpus["drill_facts_per_text"], corpus["drill_repeats"], corpus["seed"])
    # The chat-formatted SFT examples carry the system prompt each time, so BPE learns to encode it compactly.
    system = snakemake.params.system_prompt
    tokenizer_corpus = problems + drills + [f"{system}\n{r['question']}\n{sft_target(r['answer_text'], r['answer'])}"
                                            for r in sft_rows]
    tokenizer = train_tokenizer(tokenizer_corpus, base["tokenizer"]["vocab_size"],
                                base["tokenizer"].get("words", "thai"))
    texts = problems + drills
    print(f"tokenizer: {len(tokenizer)} tokens; pretraining on {len(problems)} problems + {len(drills)} drill texts "
          f"({len(facts)} distinct facts x {corpus['drill_repeats']})")
    history = pretrain_base(texts, tokenizer, base["architecture"], base["pretrain"], snakemake.output.model,
                            snakemake.params.checkpoints, seed)
    write_json(snakemake.output.history, history)
