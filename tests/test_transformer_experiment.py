"""`course reproduce transformer`: the command, its JSON and figure, the comparison with the RNN
models, the model cache, and (full profile only, `make test-full`) the measured targets of
lesson 10."""

import json
from dataclasses import asdict
from inspect import signature

import pytest
import torch

from course_lib.data.batching import make_batch
from course_lib.data.corpus import CorpusConfig, load_corpus
from course_lib.experiments.bottleneck import reproduce_bottleneck
from course_lib.experiments.runs import write_json
from course_lib.experiments.step_time import matched_transformer
from course_lib.experiments.transformer import (
    TransformerSettings,
    cross_attention_maps,
    reproduce_transformer,
    time_to_reach,
    transformer_path,
    transformer_steps,
)
from course_lib.experiments.translation import build_translator, build_vocabs
from course_lib.models.transformer import Transformer

from .reproduce_cli import full_profile_result, refused, run_reproduce

ENTRY_KEYS = {"bleu", "bleu_by_length", "params", "wall_s", "epochs"}


def test_command_writes_the_promised_json_and_figure(tmp_path):
    done = run_reproduce("transformer", "--seed", "3", out_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "seed-3" / "transformer.json").read_text())
    entry = result["models"]["transformer"]
    assert set(entry) >= ENTRY_KEYS
    assert set(entry["bleu_by_length"]) == {"1-10", "11-20", "21-30", "31+"}
    assert 0 <= entry["bleu"] <= 100 and entry["params"] > 0 and result["seed"] == 3
    assert entry["steps"] == transformer_steps() and entry["wall_s"] > 0
    assert entry["cut_short"] is False
    assert entry["settings"] == json.loads(json.dumps(asdict(TransformerSettings.build(3))))
    # Bahdanau's numbers come with its entry (from the model cache, if a run saved one there).
    bahdanau = result["models"].get("bahdanau")
    assert result["bahdanau_bleu"] == (None if bahdanau is None else bahdanau["bleu"])
    assert result["bahdanau_wall_s"] == (None if bahdanau is None else bahdanau["wall_s"])
    assert len(result["bleu_curve"]) == entry["epochs"]
    train_times = [p["train_s"] for p in result["bleu_curve"]]
    assert train_times == sorted(train_times)
    lengths = [row["seq_len"] for row in result["step_time_by_length"]]
    assert lengths == list(TransformerSettings.build(3).step_lengths)
    assert all(row["transformer_s"] > 0 and row["bahdanau_s"] > 0
               for row in result["step_time_by_length"])
    assert (tmp_path / "seed-3" / "transformer.png").stat().st_size > 10_000
    assert "| transformer |" in done.stdout


def test_bottleneck_results_of_the_same_seed_are_compared(tmp_path):
    bottleneck = reproduce_bottleneck(("none", "bahdanau"), seed=4, progress=False,
                                      cache_dir=None).result
    write_json(bottleneck, tmp_path / "bottleneck.json")
    run = reproduce_transformer(seed=4, out_dir=tmp_path, progress=False, cache_dir=None,
                                step_times=False)
    result = run.result
    assert set(result["models"]) == {"transformer", "none", "bahdanau"}
    assert result["bahdanau_bleu"] == bottleneck["models"]["bahdanau"]["bleu"]
    assert result["bahdanau_wall_s"] == bottleneck["models"]["bahdanau"]["wall_s"]
    assert result["transformer_wall_s_to_bahdanau_bleu"] == \
        time_to_reach(result["bleu_curve"], result["bahdanau_bleu"])
    # Another seed's results are not this run's comparison: absent, not made up.
    other = reproduce_transformer(seed=5, out_dir=tmp_path, progress=False, cache_dir=None,
                                  step_times=False).result
    assert set(other["models"]) == {"transformer"}
    assert other["bahdanau_bleu"] is other["bahdanau_wall_s"] is \
        other["transformer_wall_s_to_bahdanau_bleu"] is None
    # A `--model bahdanau` run's file serves as well.
    single = tmp_path / "single"
    write_json({**bottleneck, "models": {"bahdanau": bottleneck["models"]["bahdanau"]}},
               single / "bottleneck-bahdanau.json")
    alone = reproduce_transformer(seed=4, out_dir=single, progress=False, cache_dir=None,
                                  step_times=False).result
    assert set(alone["models"]) == {"transformer", "bahdanau"}
    assert alone["bahdanau_bleu"] == bottleneck["models"]["bahdanau"]["bleu"]


def test_time_to_reach_is_the_first_epoch_at_or_above_the_target():
    curve = [{"train_s": 10.0, "bleu": 50.0}, {"train_s": 20.0, "bleu": 97.0},
             {"train_s": 30.0, "bleu": 96.0}, {"train_s": 40.0, "bleu": 99.0}]
    assert time_to_reach(curve, 96.5) == 20.0
    assert time_to_reach(curve, 99.0) == 40.0
    assert time_to_reach(curve, 99.5) is None
    assert time_to_reach(curve, None) is None


def test_the_matched_transformer_is_the_bahdanau_models_size(tmp_path):
    run = reproduce_transformer(seed=0, progress=False, cache_dir=tmp_path, step_times=False)
    bahdanau = build_translator("bahdanau", run.vocabs)
    target = sum(p.numel() for p in bahdanau.parameters())
    matched = matched_transformer(run.vocabs, target)
    assert abs(sum(p.numel() for p in matched.parameters()) - target) <= 0.05 * target
    # The trained model was saved, and reuse loads it instead of training again.
    assert run.settings == TransformerSettings.build(0)
    assert transformer_path(run.settings, tmp_path).is_file()
    again = reproduce_transformer(seed=0, progress=False, cache_dir=tmp_path, reuse=True,
                                  step_times=False)
    assert again.result["models"] == run.result["models"]
    assert again.result["bleu_curve"] == run.result["bleu_curve"]


def test_cross_attention_maps_are_teacher_forced_per_pair():
    torch.manual_seed(0)
    corpus = load_corpus(CorpusConfig(size=400, seed=0))
    vocabs = build_vocabs(corpus)
    model = Transformer(TransformerSettings.build(0, vocabs).model).eval()
    pairs = corpus.test[:5]
    maps = cross_attention_maps(model, pairs, vocabs, batch_size=2)
    layers, heads = model.config.num_decoder_layers, model.config.num_heads
    for pair, found in zip(pairs, maps, strict=True):
        french, english = len(pair["fr"].split()) + 1, len(pair["en"].split()) + 1
        assert found.shape == (layers, heads, french, english)
        torch.testing.assert_close(found.sum(-1), torch.ones(layers, heads, french))
    # The same numbers as the pair read alone, without padding.
    alone = make_batch(pairs, [3], vocabs.src, vocabs.tgt)
    single = model.attention_maps(alone.src, alone.src_lengths, alone.tgt_in).cross
    torch.testing.assert_close(maps[3], torch.stack(single, dim=1)[0], atol=1e-5, rtol=1e-5)


def test_wrong_flags_are_refused(tmp_path, capsys, monkeypatch):
    said = refused("transformer", "--model", "bahdanau", out_dir=tmp_path, capsys=capsys,
                   monkeypatch=monkeypatch)
    assert "unknown model 'bahdanau' for transformer; available: transformer" in said
    said = refused("transformer", "--dataset", "digits", out_dir=tmp_path, capsys=capsys,
                   monkeypatch=monkeypatch)
    assert "--dataset is for captioning" in said
    with pytest.raises(ValueError, match="unknown model 'bahdanau'; available: transformer"):
        reproduce_transformer("bahdanau")


def test_one_seed_decides_the_corpus_the_initialisation_and_the_batches():
    settings = TransformerSettings.build(2)
    assert settings.corpus.seed == 2 and settings.model.src_vocab_size > 0
    assert "settings" not in signature(reproduce_transformer).parameters
    with pytest.raises(TypeError):
        reproduce_transformer(seed=2, settings=settings)


@pytest.fixture(scope="module", params=[0, 1], ids=lambda seed: f"seed{seed}")
def measured(request, tmp_path_factory):
    return full_profile_result(reproduce_transformer, request.param,
                               tmp_path_factory.mktemp("transformer"))


@pytest.mark.slow
def test_transformer_translates_well_overall(measured):
    assert measured["models"]["transformer"]["bleu"] >= 95


@pytest.mark.slow
def test_long_sentences_lose_little_against_short_ones(measured):
    by_length = measured["models"]["transformer"]["bleu_by_length"]
    assert by_length["31+"] >= 0.95 * by_length["1-10"]


@pytest.mark.slow
def test_transformer_trains_for_its_step_budget(measured):
    entry = measured["models"]["transformer"]
    assert entry["steps"] == transformer_steps() and not entry["cut_short"]
