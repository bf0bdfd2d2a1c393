"""Core: the helpers every stage shares, and nothing else.

Atomic file output and JSONL (``io``), the config's checks that a JSON schema cannot express and the variants as
overrides (``config``), the seed study's run ids (``seeds``), the KL references (``references``), the chapter's
experiment as a contract (``chapter``), the code-graded rewards (``rewards``), the shipped base (``shipped``), TRL's
field names (``trainer_fields``) and fetching models and datasets from the hub with one offline hint (``hub``). The bottom layer: it imports no other subpackage of thai_grpo, only the standard library
and third-party packages.
"""
