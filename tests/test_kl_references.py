"""One KL reference per config: PPO's reference model gives the same log-probs as GRPO's (TRL's reference pass after
``use_reference``) on the same tokens, for grpo.reference sft and base; every config's PPO variants read GRPO's
reference; DPO's reference is the SFT policy (TRL's 'ref' adapter) and its record says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
OFFLINE = [str(REPO / "config/config.yaml")]
REAL = OFFLINE + [str(REPO / "config/qwen3-0.6b.yaml")]


@pytest.fixture(scope="module")
def trained_adapter_dir(tmp_path_factory, tiny_model_dir, tiny_adapter_dir):
    """The tiny SFT adapter with non-zero LoRA B matrices: the SFT policy differs from the base."""
    from thai_grpo.models.loading import load_policy

    policy = load_policy(tiny_model_dir, tiny_adapter_dir, trainable=True)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    path = tmp_path_factory.mktemp("sft-adapter")
    policy.save_pretrained(path, safe_serialization=True)
    return path


def grpo_reference_logprobs(base_dir, adapter_dir, reference, ids, attention, completion, tmp_path):
    """Per-token log-probs of GRPO's KL reference as TRL 1.16 computes them (its reference pass: the 'ref' adapter
    when it exists, else every adapter disabled), after ``use_reference``; in float32 (GRPOConfig's bf16 default
    would autocast this CPU pass to bfloat16)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import use_adapter

    from thai_grpo.methods.grpo import use_reference
    from thai_grpo.models.loading import load_policy, load_tokenizer

    trainer = GRPOTrainer(model=load_policy(base_dir, adapter_dir, trainable=True),
                          reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                          args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none",
                                          beta=0.04, per_device_train_batch_size=2, num_generations=2),
                          processing_class=load_tokenizer(base_dir),
                          train_dataset=Dataset.from_list([{"prompt": "2 บวก 2"}] * 4))
    use_reference(trainer, reference)
    model = trainer.accelerator.unwrap_model(trainer.model).eval()
    with torch.no_grad(), use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
        logprobs, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, completion)
    return logprobs


@pytest.mark.parametrize("reference", ["sft", "base"])
def test_ppos_reference_gives_grpos_reference_log_probs(reference, tiny_model_dir, trained_adapter_dir, tmp_path):
    from thai_grpo.methods.ppo import reference_model, sequence_logprobs

    ids = torch.randint(3, 200, (2, 12), generator=torch.Generator().manual_seed(1))
    attention = torch.ones_like(ids)
    prompt_width = 7
    with torch.no_grad():
        ppo = {name: sequence_logprobs(reference_model(tiny_model_dir, trained_adapter_dir, name, "float32"), ids,
                                       attention, prompt_width, 1.0) for name in ("sft", "base")}
    grpo = grpo_reference_logprobs(tiny_model_dir, trained_adapter_dir, reference, ids, attention,
                                   ids.shape[1] - prompt_width, tmp_path)
    torch.testing.assert_close(ppo[reference], grpo, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(ppo["sft"], ppo["base"], atol=1e-3)  # the two references are told apart


def test_an_unknown_reference_is_refused(tiny_model_dir, tiny_adapter_dir):
    from thai_grpo.methods.ppo import reference_model

    with pytest.raises(ValueError, match="grpo.reference='policy': use one of sft, base"):
        reference_model(tiny_model_dir, tiny_adapter_dir, "policy", "float32")


@pytest.mark.parametrize("files, expected", [(OFFLINE, "sft"), (REAL, "base")])
def test_every_ppo_variant_reads_grpos_reference(files, expected):
    from thai_grpo.workflow import load_config_files
    from thai_grpo.workflow import variant_plan
    from thai_grpo.core.references import KL_REFERENCES

    config = load_config_files(files, str(REPO / "config/schema.yaml"))
    plans = [variant_plan(config, name) for name in config["variants"]]
    assert variant_plan(config, "grpo")["grpo_args"]["reference"] == expected
    ppo = [plan for plan in plans if plan["method"] == "ppo"]
    assert ppo and {plan["grpo_args"]["reference"] for plan in ppo} == {expected}
    assert f"grpo.reference: {expected}" in KL_REFERENCES[expected]["ppo"]


def test_dpos_reference_is_the_sft_policy(tiny_model_dir, trained_adapter_dir, tmp_path):
    """With reference: base or sft alike, TRL's DPOTrainer keeps a frozen 'ref' copy of the SFT adapter."""
    from datasets import Dataset
    from trl import DPOConfig

    from thai_grpo.methods.dpo import KL_REFERENCE, sampled_token_trainer
    from thai_grpo.models.loading import load_policy, load_tokenizer

    trainer = sampled_token_trainer()(
        model=load_policy(tiny_model_dir, trained_adapter_dir, trainable=True), ref_model=None,
        args=DPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none"),
        train_dataset=Dataset.from_list([{"prompt_ids": [5, 6], "chosen_ids": [7], "rejected_ids": [8]}]),
        processing_class=load_tokenizer(tiny_model_dir))
    model = trainer.accelerator.unwrap_model(trainer.model)
    start = {name: p for name, p in model.named_parameters() if ".default." in name}
    assert start and all(torch.equal(p, model.get_parameter(name.replace(".default.", ".ref.")))
                         for name, p in start.items())
    assert "SFT policy" in KL_REFERENCE


@pytest.mark.parametrize("reference", ["sft", "base"])
def test_the_report_says_what_each_kl_is_to(reference, tmp_path):
    """The PPO-curves panel and caption name the configured reference; the k1-vs-k3 section calls its KL
    KL(GRPO || SFT), and the KL TRL optimises against only when grpo.reference is sft."""
    import copy

    from workflow import load_report_fixture

    from thai_grpo.core.references import REFERENCE_NAMES
    from thai_grpo.report.run_words import sft_kl_words, training_kl_name
    from thai_grpo.report.figures import draw_all
    from thai_grpo.report.html import build_context, render_report

    results, samples = load_report_fixture()
    results = copy.deepcopy(results)
    results.setdefault("config", {}).setdefault("grpo", {})["reference"] = reference
    assert training_kl_name(results["config"]) == REFERENCE_NAMES[reference]
    context = build_context(results, samples, {})
    assert context["training_kl_name"] == REFERENCE_NAMES[reference]
    html = render_report(results, samples, draw_all({"kl_real": results["kl_real"]}, tmp_path), REPO / "report")
    assert "KL(GRPO || SFT)" in html
    assert ("the KL TRL optimises against" in html) == (reference == "sft")
    assert ("not the KL GRPO trained against" in sft_kl_words(results["config"])) == (reference == "base")


def test_the_ppo_kl_panel_is_titled_with_the_reference(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from thai_grpo.report import figures

    titles = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path: titles.extend(a.get_title() for a in fig.axes))
    steps = [{"step": 1, "reward_mean": 0.5, "kl": 0.01, "clip_ratio": 0.0}]
    figures.plot_ppo_curves({"grpo": steps}, tmp_path / "ppo.png", "the base model (adapter disabled)")
    plt.close("all")
    assert "KL to the base model (adapter disabled) (PPO: k1, GRPO: k3)" in titles


def test_the_ppo_curves_are_drawn_into_the_figures_folder_under_their_name(tmp_path, monkeypatch):
    """draw_all passes the figure's path where plot_ppo_curves takes it (not the reference's name as a file name)."""
    from thai_grpo.report.figures import draw_all

    monkeypatch.chdir(tmp_path)
    steps = [{"step": 1, "reward_mean": 0.5, "kl": 0.01, "clip_ratio": 0.0}]
    paths = draw_all({"runs": {"ppo": {"method": "ppo", "steps": steps}}}, tmp_path / "figures")
    assert paths["ppo_curves"] == tmp_path / "figures" / "ppo_curves.png" and paths["ppo_curves"].is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures"]  # nothing written beside it
