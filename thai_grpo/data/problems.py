"""Data: load the Thai GSM8K rows (synthetic, local or hub), parse gold answers, split, build prompts.

Every source goes through the same path: a ``datasets.Dataset`` with the real dataset's columns
(``translated_question``, ``translated_answer`` ending in ``#### N``) -> ``normalize_rows`` -> ``split_rows``.
A second held-out set (``eval.extra_sets``, e.g. MGSM Thai) is loaded by the same loader and turned into
the same held-out rows by ``extra_heldout_rows``, minus the questions a training set already holds.
"""

from __future__ import annotations

import hashlib
import numbers
import random
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from thai_grpo.core.rewards import THAI_DIGITS

# The offline models' system prompt: "think in <think>...</think>, then answer with a number". Short on purpose: it is
# in every SFT, GRPO and sampling sequence, and at ~21 tokens (the chapter's takes ~38, an earlier one ~49 with the
# offline tokenizer) it costs a fifth less compute per training and sampling token than the longest did.
SYSTEM_PROMPT = "คิดใน <think>...</think> แล้วตอบเป็นตัวเลข"

_GOLD_NUMBER = re.compile(r"^-?\d[\d,]*$")
_CALCULATOR_ANNOTATION = re.compile(r"<<[^<>]*>>")


def parse_gold_answer(answer_text: str) -> int | None:
    """The integer after the last ``####`` of a GSM8K solution (Thai digits and commas allowed), else None."""
    if "####" not in answer_text:
        return None
    tail = answer_text.rsplit("####", 1)[1].strip().translate(THAI_DIGITS).replace(" ", "")
    if not _GOLD_NUMBER.match(tail):
        return None
    return int(tail.replace(",", ""))


def solution_steps(answer_text: str) -> str:
    """The worked solution before ``####``, without GSM8K's ``<<a*b=c>>`` calculator annotations."""
    steps = answer_text.rsplit("####", 1)[0]
    return _CALCULATOR_ANNOTATION.sub("", steps).strip()


def normalize_text(text: str) -> str:
    """NFC, lower case, whitespace collapsed: two questions equal under this are the same problem."""
    return " ".join(unicodedata.normalize("NFC", text).lower().split())


def text_hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def build_prompt(question: str, system_prompt: str = SYSTEM_PROMPT) -> list[dict]:
    """The conversational prompt: a Thai system message, then the question as the user turn."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]


def chat_prompt_texts(tokenizer, questions: list[str], system_prompt: str,
                      chat_template_kwargs: dict | None = None) -> list[str]:
    """The prompts as the policy reads them: ``build_prompt`` through the tokenizer's chat template with the
    generation prompt and the run's ``chat_template_kwargs`` (e.g. Qwen3's ``enable_thinking``), as TRL does.
    Encode them with ``add_special_tokens=False``: the template already holds every special token."""
    return [tokenizer.apply_chat_template(build_prompt(q, system_prompt), tokenize=False, add_generation_prompt=True,
                                          **(chat_template_kwargs or {})) for q in questions]


#: How much of the solution an SFT example's think block holds (``sft_target``); ``think`` of a row, default full.
THINK_KINDS = ("full", "one_line", "empty")


def sft_target(answer_text: str, answer: int, think: str = "full") -> str:
    """The assistant turn the SFT stage imitates: the reasoning inside a think block, the number last.

    ``think``: ``full`` = every step; ``one_line`` = the last step only (the others done "in the head");
    ``empty`` = ``<think></think>`` and the number at once (the reward-hacking experiment's brief thinkers).
    """
    if think == "empty":
        return f"<think></think>\n{answer}"
    steps = solution_steps(answer_text)
    if think == "one_line":
        steps = steps.splitlines()[-1] if steps else steps
    elif think != "full":
        raise ValueError(f"think={think!r}: use one of {', '.join(THINK_KINDS)}")
    return f"<think>\n{steps}\n</think>\n{answer}"


def pretraining_text(question: str, answer_text: str, answer: int) -> str:
    """Plain text for the from-scratch base: the problem, then its solution as a reasoning trace.

    No chat template and no system prompt (those are the SFT adapter's to learn), but the trace already
    has the ``<think>`` shape, as real base models have read reasoning traces before any chat tuning.
    """
    return f"{question}\n{sft_target(answer_text, answer)}"


@dataclass(frozen=True)
class DataSource:
    """Where the rows come from; see the config schema's ``data`` section."""

    source: str
    question_column: str = "translated_question"
    answer_column: str = "translated_answer"
    path: str | None = None
    revision: str | None = None
    split: str = "train"
    name: str | None = None  # the hub dataset's configuration (subset), e.g. "th" of juletxara/mgsm


def load_source_dataset(src: DataSource, kind: str = "dataset", where: str = "data.local_path"):
    """A ``datasets.Dataset`` from the hub (pinned revision), a local file or a ``save_to_disk`` folder.

    ``kind`` ('dataset' or 'held-out set') and ``where`` (the config key of a local path) only shape the
    one-line errors: what to download offline, which key names a missing file.
    """
    import datasets

    if src.source == "hub":
        return _load_hub_dataset(datasets, src, kind)
    if src.source == "local":
        path = Path(src.path)
        if not path.exists():
            raise FileNotFoundError(f"{where} {path} does not exist: point it at a "
                                    f"{'/'.join(SUPPORTED_LOCAL_FORMATS)} file or a folder written by "
                                    "Dataset.save_to_disk")
        if path.is_dir():
            loaded = datasets.load_from_disk(str(path))
            return loaded[src.split] if isinstance(loaded, datasets.DatasetDict) else loaded
        return load_local_file(path, where)
    raise ValueError(f"data.source={src.source!r} is not loadable here; use 'hub' or 'local' "
                     "(synthetic rows are generated by thai_grpo.data.synthetic)")


def _load_hub_dataset(datasets, src: DataSource, kind: str):
    """``datasets.load_dataset`` of the hub dataset; offline and not cached, one clear line instead of a trace."""
    from thai_grpo.core.hub import HubUnavailable, offline_hint, unreachable_errors

    try:
        return datasets.load_dataset(src.path, src.name, revision=src.revision, split=src.split)
    except unreachable_errors():
        raise HubUnavailable(offline_hint(src.path, src.revision, kind=kind)) from None


def _require_columns(records, question_column: str, answer_column: str, where: str) -> None:
    """Raise KeyError naming the config keys to fix when the records lack the question or answer column."""
    missing = {question_column, answer_column} - set(records.column_names if hasattr(records, "column_names")
                                                      else (records[0].keys() if records else ()))
    if missing:
        raise KeyError(f"dataset has no column(s) {sorted(missing)}: set {where}.question_column / "
                       f"{where}.answer_column to the dataset's column names")


def _row(question: str, answer_text: str, answer: int, skeleton: str | None = None) -> dict:
    """One problem as every later stage reads it; the id is the question's normalized-text hash. A synthetic
    problem also carries its ``skeleton`` (template and operand sequence, ``thai_grpo.data.synthetic``)."""
    row = {"id": text_hash(question)[:12], "question": question, "answer_text": answer_text, "answer": answer}
    return {**row, "skeleton": skeleton} if skeleton else row


def leakage_keys(row: dict) -> set[str]:
    """What makes two problems the same: the normalized question text, and the skeleton where there is one.

    Real data (GSM8K translations, MGSM) has no skeletons, so the text hash is all there is to compare."""
    keys = {"text:" + text_hash(row["question"])}
    return keys | {"skeleton:" + row["skeleton"]} if row.get("skeleton") else keys


def normalize_rows(records, question_column: str, answer_column: str) -> tuple[list[dict], int]:
    """Rows ``{id, question, answer_text, answer}`` with integer gold answers, and how many were dropped."""
    _require_columns(records, question_column, answer_column, "data")
    rows, dropped = [], 0
    for record in records:
        question, answer_text = record[question_column], record[answer_column]
        answer = parse_gold_answer(answer_text) if isinstance(answer_text, str) else None
        if answer is None or not isinstance(question, str) or not question.strip():
            dropped += 1
            continue
        rows.append(_row(question, answer_text, answer, record.get("skeleton")))
    return rows, dropped


def deduplicate(rows: list[dict]) -> list[dict]:
    """Keep the first row of each normalized question: a problem may not sit on both sides of a split."""
    seen, unique = set(), []
    for row in rows:
        key = text_hash(row["question"])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def split_rows(rows: list[dict], seed: int, train_size: int, heldout_size: int, sft_size: int) -> dict:
    """Shuffle once with ``seed``, then cut disjoint sets: held-out first, then GRPO train, SFT and pretraining.

    Held-out = the first ``heldout_size`` shuffled problems that share no leakage key (``leakage_keys``: text,
    skeleton) with an earlier held-out problem. Every other row sharing a key with a held-out problem is set
    aside (``reserved``) and used nowhere, so no held-out problem's text or skeleton occurs in any training set.
    Of the rest, in order: ``train`` (GRPO prompts), ``sft``, and ``pretrain`` (all that remains). Held-out comes
    first so that changing ``train_size`` or ``sft_size`` never changes the evaluation set.
    """
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    heldout, reserved_keys = [], set()
    for row in shuffled:
        if len(heldout) == heldout_size:
            break
        if not leakage_keys(row) & reserved_keys:
            heldout.append(row)
            reserved_keys |= leakage_keys(row)
    chosen = {id(row) for row in heldout}
    others = [row for row in shuffled if id(row) not in chosen]
    rest = [row for row in others if not leakage_keys(row) & reserved_keys]
    needed = train_size + sft_size
    if len(heldout) < heldout_size or needed > len(rest):
        raise ValueError(f"data has {len(rows)} usable problems: {len(heldout)} distinct held-out problems and "
                         f"{len(rest)} left for training once their skeletons are set aside, but heldout_size = "
                         f"{heldout_size} and train_size + sft_size = {needed}: lower the sizes or use more data")
    return {"heldout": heldout, "train": rest[:train_size], "sft": rest[train_size:needed],
            "pretrain": rest[needed:], "reserved": [row for row in others if leakage_keys(row) & reserved_keys]}


def datasets_permutation(num_rows: int, seed: int) -> list[int]:
    """The row order of ``datasets.Dataset.shuffle(seed=seed)`` on ``num_rows`` rows (a numpy permutation), taken
    from ``datasets`` itself."""
    import datasets

    return datasets.Dataset.from_dict({"row": list(range(num_rows))}).shuffle(seed=seed)["row"]


def chapter_split(records: list[dict], seed: int, train_size: int, heldout_size: int, sft_size: int,
                  question_column: str, answer_column: str) -> dict:
    """The chapter's selection: the GRPO problems are exactly ``Dataset.shuffle(seed).select(range(train_size))`` of
    the source rows, in that order; held-out and then SFT problems are cut from the rest, in the same shuffled order,
    after parsing and deduplication and without any problem whose text (or skeleton) is in the GRPO set.

    A GRPO row without an integer gold answer is an error, not dropped: the chapter trains on exactly these rows.
    Returns the ``split_rows`` sets, with ``dropped`` (rest rows without a gold answer) and ``duplicates`` counts."""
    if train_size > len(records):
        raise ValueError(f"data has {len(records)} rows but train_size = {train_size}: lower it or use more data")
    order = datasets_permutation(len(records), seed)
    shuffled = [records[i] for i in order]
    train, unparsed = normalize_rows(shuffled[:train_size], question_column, answer_column)
    if unparsed:
        raise ValueError(f"{unparsed} of the {train_size} training rows (shuffle(seed={seed}).select(range("
                         f"{train_size}))) have no integer gold answer after '####': fix the data or check "
                         f"data.answer_column ({answer_column!r})")
    rest, dropped = normalize_rows(shuffled[train_size:], question_column, answer_column)
    unique = deduplicate(rest)
    train_keys = set().union(*(leakage_keys(row) for row in train))
    unseen = [row for row in unique if not leakage_keys(row) & train_keys]
    if len(unseen) < heldout_size + sft_size:
        raise ValueError(f"data has {len(unseen)} problems outside the {train_size} training ones, but heldout_size "
                         f"+ sft_size = {heldout_size + sft_size}: lower the sizes or use more data")
    heldout = unseen[:heldout_size]
    sft = unseen[heldout_size:heldout_size + sft_size]
    return {"heldout": heldout, "train": train, "sft": sft, "pretrain": [], "reserved": [], "dropped": dropped,
            "duplicates": len(rest) - len(unique), "seen_in_training": len(unique) - len(unseen)}


def assert_no_leakage(heldout: list[dict], **training_sets: list[dict]) -> None:
    """Raise if any held-out problem's text (normalized-text hash) or skeleton appears in a training set."""
    heldout_keys = set().union(*(leakage_keys(row) for row in heldout))
    for name, rows in training_sets.items():
        leaked = [row for row in rows if leakage_keys(row) & heldout_keys]
        if leaked:
            shared = sorted(key.split(":")[0] for key in leakage_keys(leaked[0]) & heldout_keys)
            raise ValueError(f"{len(leaked)} held-out problem(s) share their {' and '.join(shared)} with the {name} "
                             f"set, e.g. {leaked[0]['question'][:60]!r}: the split must be disjoint; deduplicate "
                             "the source data")


def parse_gold_number(value) -> int | None:
    """The integer in a final-answer column such as MGSM's ``answer_number``: an int, an integral float (18.0),
    or an integer string (Thai digits and thousands commas allowed); None for anything else (18.5, '', None, True)."""
    if isinstance(value, str):
        text = value.strip().translate(THAI_DIGITS).replace(",", "")
        if _GOLD_NUMBER.match(text):
            return int(text)
        try:
            value = float(text)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    return int(value) if float(value).is_integer() else None  # nan and inf are not integers either


def extra_set_source(spec: dict) -> DataSource:
    """Where one ``eval.extra_sets`` entry loads from, with the schema's defaults (MGSM's split and columns)."""
    return DataSource(spec.get("source", "hub"), spec.get("question_column", "question"),
                      spec.get("answer_column", "answer_number"), path=spec["path"],
                      revision=spec.get("revision", "main"), split=spec.get("split", "test"), name=spec.get("name"))


def number_answer_rows(records, question_column: str, answer_column: str, where: str) -> list[dict]:
    """Held-out rows ``{id, question, answer_text, answer}`` from records whose answer column holds the final
    number (MGSM's ``answer_number``); ``answer_text`` is ``'#### N'``, as there is no worked solution.

    A benchmark's problems are not dropped quietly: a missing question or a non-integer answer raises
    ValueError naming the row, the value and the fix (``where`` is the config key of the set).
    """
    _require_columns(records, question_column, answer_column, where)
    rows = []
    for index, record in enumerate(records):
        question, value = record[question_column], record[answer_column]
        answer = parse_gold_number(value)
        if answer is None:
            raise ValueError(f"{where}: row {index} has {answer_column}={value!r}, not an integer (18 or 18.0): "
                             f"point {where}.answer_column at the final-number column or fix the row")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{where}: row {index} has an empty {question_column}: point "
                             f"{where}.question_column at the question text or fix the row")
        rows.append(_row(question, f"#### {answer}", answer, record.get("skeleton")))
    return rows


def drop_seen_in_training(rows: list[dict], **training_sets: list[dict]) -> tuple[list[dict], int]:
    """The rows that share no leakage key (text, skeleton: ``leakage_keys``) with a training set, and how many did.

    An outside test set may share problems with the training data; those are dropped and counted rather than
    refused, so the rest still measures unseen problems and the training stages stay as they are.
    """
    seen = set().union(*(leakage_keys(row) for rows_of_set in training_sets.values() for row in rows_of_set))
    kept = [row for row in rows if not leakage_keys(row) & seen]
    return kept, len(rows) - len(kept)


def extra_heldout_rows(records, spec: dict, where: str, **training_sets: list[dict]) -> tuple[list[dict], dict]:
    """One second held-out set in the held-out row format, deduplicated and without problems seen in training,
    with its counts (``source_rows``, ``duplicates_removed``, ``seen_in_training_dropped``, ``problems``)."""
    source = extra_set_source(spec)
    rows = number_answer_rows(records, source.question_column, source.answer_column, where)
    unique = deduplicate(rows)
    kept, seen = drop_seen_in_training(unique, **training_sets)
    if not kept:
        raise ValueError(f"{where}: none of its {len(rows)} problems is left after removing duplicates and the "
                         f"{seen} also in a training set: use a test set disjoint from the training data")
    stats = {"source_rows": len(rows), "duplicates_removed": len(rows) - len(unique),
             "seen_in_training_dropped": seen, "problems": len(kept)}
    return kept, stats


def grpo_records(rows: list[dict], system_prompt: str) -> list[dict]:
    """GRPOTrainer's dataset: a conversational ``prompt``, the integer ``answer`` the reward reads and the problem's
    ``id`` (TRL hands both to the reward functions; the rollouts file names each completion's problem by it)."""
    return [{"prompt": build_prompt(r["question"], system_prompt), "answer": r["answer"], "id": r.get("id")}
            for r in rows]


def sft_records(rows: list[dict], system_prompt: str) -> list[dict]:
    """SFTTrainer's prompt-completion dataset: the loss falls on the assistant turn only (a row's ``think``, if
    set, says how much of its solution the think block holds: ``sft_target``)."""
    return [{"prompt": build_prompt(r["question"], system_prompt),
             "completion": [{"role": "assistant",
                             "content": sft_target(r["answer_text"], r["answer"], r.get("think", "full"))}]}
            for r in rows]


# --- Local files by suffix, MGSM's original headerless TSV among them -------------------------------------

#: Formats ``datasets.load_dataset`` reads by its packaged builders (the file's columns keep their names).
DATASETS_FILE_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
#: MGSM's original distribution: no header, ``question<TAB>answer``; named as on the hub copy (juletxara/mgsm),
#: so one ``eval.extra_sets`` entry reads either with the schema's default columns.
TSV_COLUMNS = ("question", "answer_number")
SUPPORTED_LOCAL_FORMATS = (*DATASETS_FILE_FORMATS, ".tsv")


def load_local_file(path: Path, where: str):
    """A ``datasets.Dataset`` from one local file, by its suffix (``SUPPORTED_LOCAL_FORMATS``).

    An unknown suffix raises ValueError naming the key (``where``), the file and the supported formats.
    """
    import datasets

    suffix = path.suffix.lower()
    if suffix == ".tsv":
        return datasets.Dataset.from_dict(read_question_answer_tsv(path))
    if suffix not in DATASETS_FILE_FORMATS:
        raise ValueError(f"{where} {path}: unsupported file type {path.suffix or '(no suffix)'!r}; supported: "
                         f"{', '.join(SUPPORTED_LOCAL_FORMATS)} (.tsv = headerless question<TAB>answer lines, "
                         "MGSM's original format) or a Dataset.save_to_disk folder")
    return datasets.load_dataset(DATASETS_FILE_FORMATS[suffix], data_files=str(path), split="train")


def read_question_answer_tsv(path: str | Path) -> dict[str, list[str]]:
    """Columns ``{question: [...], answer_number: [...]}`` of a headerless ``question<TAB>answer`` file (UTF-8).

    MGSM's original distribution (google-research/url-nlp, ``mgsm/mgsm_XX.tsv``). Answers stay text as written
    (``2,125``); ``parse_gold_number`` reads the thousands separators. Blank lines are skipped; a line without
    exactly one tab raises ValueError naming the file and the line (a TSV has no quoting to hide a tab in).
    """
    columns: dict[str, list[str]] = {name: [] for name in TSV_COLUMNS}
    with open(path, encoding="utf-8-sig", newline="") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise ValueError(f"{path}, line {number}: {len(fields)} tab-separated fields, expected 2 "
                                 "(question<TAB>answer, no header): fix the line or convert the file to .jsonl")
            for name, value in zip(TSV_COLUMNS, fields):
                columns[name].append(value.strip())
    return columns
