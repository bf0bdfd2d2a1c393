"""Code-graded rewards for model completions on Thai grade-school math.

Completions are untrusted text: every function here returns a value for any input, never raises, and runs in
linear time (``str.find``/``str.count`` or one regex without nested quantifiers, on a bounded window).

Reward of one completion ``y`` for a problem with integer answer ``g``::

    R(y, g) = correct(y, g) + format(y) + thai(y)           in [0, MAX_TOTAL]
    correct = CORRECT_REWARD  if extract_answer(y) == g     else 0   (1.0)
    format  = FORMAT_REWARD   if <think>.+?</think> in y    else 0   (0.3)
    thai    = THAI_REWARD     if #thai_alpha > #alpha / 2   else 0   (0.2)

``format_checked`` replaces ``format``: FORMAT_REWARD only for a worked step ``a op b = c`` in the first think block.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

CORRECT_REWARD = 1.0
FORMAT_REWARD = 0.3
THAI_REWARD = 0.2
MAX_TOTAL = CORRECT_REWARD + FORMAT_REWARD + THAI_REWARD  # 1.5

THAI_DIGITS = str.maketrans("๐๑๒๓๔๕๖๗๘๙", "0123456789")  # U+0E50..U+0E59 -> 0..9

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_TAIL_CHARS = 10_000  # number extraction reads only this tail after the last </think>
MAX_ANSWER_DIGITS = 4300  # a longer number is no answer (CPython's int(str) limit)

# re.ASCII: \d is [0-9] only; Thai digits are mapped to ASCII first, other scripts' digits are no answer.
_NUMBER = re.compile(r"-?\d[\d,]*", re.ASCII)
_NUMBER_CHARS = frozenset("0123456789,")

THAI_FIRST, THAI_LAST = 0x0E01, 0x0E5B
_THAI_ALPHA = tuple(chr(c) for c in range(THAI_FIRST, THAI_LAST + 1) if chr(c).isalpha())


def _as_text(completion: Any) -> str:
    """Any object -> str, without raising (bytes are decoded leniently, None is "")."""
    if isinstance(completion, str):
        return completion
    if completion is None:
        return ""
    if isinstance(completion, (bytes, bytearray)):
        return bytes(completion).decode("utf-8", errors="replace")
    try:
        return str(completion)
    except Exception:
        return ""


def answer_section(completion: str) -> str:
    """Text after the last ``</think>`` (the whole text without one)."""
    text = _as_text(completion)
    close = text.rfind(THINK_CLOSE)
    return text if close < 0 else text[close + len(THINK_CLOSE):]


def _parse_number(match_text: str) -> int | None:
    """'-1,234,' -> -1234; None when longer than MAX_ANSWER_DIGITS digits."""
    digits = match_text.replace(",", "")
    if len(digits.lstrip("-")) > MAX_ANSWER_DIGITS:
        return None
    try:
        return int(digits)
    except ValueError:
        return None


def extract_answer(completion: str) -> int | None:
    """The last integer ``-?\\d[\\d,]*`` (commas removed, Thai digits mapped) in the last ANSWER_TAIL_CHARS characters
    after the last ``</think>``; None without one, over MAX_ANSWER_DIGITS digits, or maybe begun before that window."""
    section = answer_section(completion)
    start = max(0, len(section) - ANSWER_TAIL_CHARS)
    tail = section[start:].translate(THAI_DIGITS)
    last = None
    for last in _NUMBER.finditer(tail):
        pass
    if last is None:
        return None
    if start > 0 and _may_continue_left(section, start, tail, last):
        return None
    return _parse_number(last.group())


def _may_continue_left(section: str, start: int, tail: str, match: re.Match[str]) -> bool:
    """True when the match could be the cut-off end of a number begun before the window."""
    if match.group().startswith("-"):
        return False  # '-' cannot occur inside a number, so this one starts here
    before_window = section[start - 1].translate(THAI_DIGITS)
    if before_window == "-":
        return match.start() == 0  # "-" + "5..." split by the window edge
    only_commas_before = tail[: match.start()].strip(",") == ""
    return only_commas_before and before_window in _NUMBER_CHARS


def correctness_reward(completion: str, gold: int) -> float:
    """CORRECT_REWARD (1.0) if extract_answer(completion) == gold else 0.0."""
    answer = extract_answer(completion)
    return CORRECT_REWARD if answer is not None and answer == gold else 0.0


def has_think_block(completion: str, lenient: bool = False) -> bool:
    """Whether ``<think>.+?</think>`` (strict) / ``<think>.*?</think>`` (lenient) matches, DOTALL: checking the
    earliest ``<think>`` suffices (linear time)."""
    text = _as_text(completion)
    open_at = text.find(THINK_OPEN)
    if open_at < 0:
        return False
    min_content = 0 if lenient else 1
    return text.find(THINK_CLOSE, open_at + len(THINK_OPEN) + min_content) >= 0


def format_reward(completion: str, lenient: bool = False) -> float:
    """FORMAT_REWARD (0.3) if ``has_think_block``; lenient also pays ``<think></think>`` (the hacked one)."""
    return FORMAT_REWARD if has_think_block(completion, lenient) else 0.0


def think_content(completion: str) -> str | None:
    """What ``<think>.*?</think>`` captures of the first ``<think>``; None when it is missing or never closed."""
    text = _as_text(completion)
    open_at = text.find(THINK_OPEN)
    if open_at < 0:
        return None
    start = open_at + len(THINK_OPEN)
    close = text.find(THINK_CLOSE, start)
    return None if close < 0 else text[start:close]


def empty_think(completion: str) -> bool:
    """``<think></think>``: the lenient regex pays it, the strict one not (the chapter's reward hack)."""
    return has_think_block(completion, lenient=True) and not has_think_block(completion)


def blank_think(completion: str) -> bool:
    """The strict regex's loophole: a first think block of only whitespace or one character (``<think> </think>``,
    Qwen3's ``<think>\\n\\n</think>``), which ``<think>.+?</think>`` still pays."""
    content = think_content(completion)
    return bool(content) and len(content.strip()) <= 1


def hollow_think(completion: str) -> bool:
    """A think block with no reasoning in it: empty (the lenient regex's hack) or ``blank_think``."""
    content = think_content(completion)
    return content is not None and len(content.strip()) <= 1


# One worked step, "8 + 6 = 14" (Thai digits mapped first; x, ×, * and the Unicode minus count). No nested
# quantifiers, and a match may start only at the first digit of a number, so the search is linear in the block.
_WORKED_STEP = re.compile(r"(?<!\d)\d+\s*[x×*+\-−/÷]\s*\d+\s*=\s*\d", re.ASCII)


def worked_think_block(completion: str) -> bool:
    """Whether the first closed think block shows a worked step ``a op b = c``; any step counts, true or not."""
    content = think_content(completion)
    return content is not None and _WORKED_STEP.search(content.translate(THAI_DIGITS)) is not None


def checked_format_reward(completion: str) -> float:
    """FORMAT_REWARD (0.3) if the first closed think block shows a worked step (``worked_think_block``)."""
    return FORMAT_REWARD if worked_think_block(completion) else 0.0


def thai_reward(completion: str) -> float:
    """THAI_REWARD (0.2) if 2 * #thai_alpha > #alpha (str.isalpha; Thai: U+0E01..U+0E5B), else 0.0."""
    text = _as_text(completion)
    alpha = sum(map(str.isalpha, text))
    thai = sum(text.count(ch) for ch in _THAI_ALPHA) if alpha else 0
    return THAI_REWARD if 2 * thai > alpha else 0.0


# TRL's batch reward functions: f(prompts=..., completions=..., **dataset_columns) -> list[float].
def _message_content(message: Any) -> str:
    """Content of one chat message: a string, or a list of {"type": "text", "text": ...} parts."""
    content = message.get("content", "") if isinstance(message, dict) else message
    if isinstance(content, (list, tuple)):
        return "".join(_as_text(part.get("text", "") if isinstance(part, dict) else part) for part in content)
    return _as_text(content)


# Where a response parser puts the think block it split off (TRL's Qwen3 / DeepSeek-R1 templates; gpt-oss, Gemma 4).
REASONING_KEYS = ("reasoning_content", "thinking")


def _message_text(message: Any) -> str:
    """Text of one message as the model wrote it: a think block a response parser split off is put back in front."""
    content = _message_content(message)
    if isinstance(message, dict):
        for key in REASONING_KEYS:
            reasoning = message.get(key)
            if isinstance(reasoning, str):
                return f"{THINK_OPEN}{reasoning}{THINK_CLOSE}{content}"
    return content


def reward_breakdown(completion: str, gold: int, lenient_format: bool = False) -> dict[str, float]:
    """{"correct", "format", "thai", "total"}: one completion's code rewards and their sum."""
    parts = {"correct": correctness_reward(completion, gold),
             "format": format_reward(completion, lenient=lenient_format), "thai": thai_reward(completion)}
    return {**parts, "total": parts["correct"] + parts["format"] + parts["thai"]}


def completion_text(completion: Any) -> str:
    """Plain text of a TRL completion (a string, or chat messages joined by newlines), with any think block a response
    parser split off put back."""
    if isinstance(completion, dict):
        return _message_text(completion)
    if isinstance(completion, (list, tuple)):
        return "\n".join(_message_text(message) for message in completion)
    return _as_text(completion)


def correct(completions: Sequence[Any], answer: Sequence[int], **kwargs: Any) -> list[float]:
    """[correctness_reward(y_i, answer_i)] - 1.0 when the final number equals the gold answer."""
    if len(completions) != len(answer):
        raise ValueError(f"{len(completions)} completions but {len(answer)} answers")
    return [correctness_reward(completion_text(y), gold) for y, gold in zip(completions, answer)]


def think_format(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """[format_reward(y_i)] - 0.3 for a non-empty <think>...</think> block."""
    return [format_reward(completion_text(y)) for y in completions]


def think_format_lenient(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """[format_reward(y_i, lenient=True)] - 0.3 even for an empty <think></think>."""
    return [format_reward(completion_text(y), lenient=True) for y in completions]


def think_format_checked(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """[checked_format_reward(y_i)] - 0.3 only for a think block that shows a worked step ``a op b = c``."""
    return [checked_format_reward(completion_text(y)) for y in completions]


def thai_script(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """[thai_reward(y_i)] - 0.2 when most alphabetic characters are Thai."""
    return [thai_reward(completion_text(y)) for y in completions]


RewardFunction = Callable[..., list[float]]


@dataclasses.dataclass(frozen=True)
class Reward:
    """One entry of the reward registry: the TRL reward function and how the report names what it pays."""
    function: RewardFunction
    words: str


# The rewards a config may list, by name: the one place a reward is added (the schema's enum, the report's words and
# TRL's logged names come from here).
REWARDS: dict[str, Reward] = {
    "correct": Reward(correct, f"correct answer +{CORRECT_REWARD:.1f}"),
    "format": Reward(think_format, f"non-empty think block +{FORMAT_REWARD:.1f}"),
    "format_lenient": Reward(think_format_lenient, f"think block, empty allowed, +{FORMAT_REWARD:.1f}"),
    "thai": Reward(thai_script, f"Thai script +{THAI_REWARD:.1f}"),
    "format_checked": Reward(think_format_checked, f"think block with a worked step +{FORMAT_REWARD:.1f}"),
}
REWARD_FUNCTIONS: dict[str, RewardFunction] = {name: reward.function for name, reward in REWARDS.items()}
REWARD_WORDS: dict[str, str] = {name: reward.words for name, reward in REWARDS.items()}

# TRL logs rewards/<__name__>/mean: use the registry names (__qualname__ stays, so pickling works).
for _name, _function in REWARD_FUNCTIONS.items():
    _function.__name__ = _name
del _name, _function


def reward_functions(names: Sequence[str]) -> list[RewardFunction]:
    """The TRL reward functions for the given registry names, in order."""
    unknown = [name for name in names if name not in REWARD_FUNCTIONS]
    if unknown:
        raise ValueError(f"unknown reward function {unknown[0]!r}; valid names: {', '.join(REWARD_FUNCTIONS)}")
    return [REWARD_FUNCTIONS[name] for name in names]
