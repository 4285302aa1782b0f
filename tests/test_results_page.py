"""docs/results.md: read every seed's JSON (merging single-model runs), check each target seed by
seed, and summarise each metric over the seeds."""

import json
from pathlib import Path

import pytest

from course_lib.experiments.catalogue import REGISTRY
from course_lib.experiments.results_page import load_seeds as load_registered
from course_lib.experiments.results_page import results_page as page_of
from course_lib.experiments.targets import seed_targets

TARGETS = REGISTRY.targets()


def load_seeds(results_dir, profile="full"):
    return load_registered(results_dir, REGISTRY, profile)


def results_page(seeds, profile="full"):
    return page_of(seeds, REGISTRY, profile)

BUCKETS = ("1-10", "11-20", "21-30", "31+")


def settings(seed, hidden_size=256):
    return {"seed": seed, "model": {"hidden_size": hidden_size}, "train": {"steps": 1000},
            "threads": 2}


def translation(bleu, by_length, alignment=None, steps=1000, wall_s=300.0, seed=0):
    return {"bleu": bleu, "bleu_by_length": dict(zip(BUCKETS, by_length, strict=True)),
            "alignment_accuracy": alignment, "params": 1000, "steps": steps, "epochs": 8,
            "wall_s": wall_s, "final_train_loss": 0.1, "cut_short": False,
            "settings": settings(seed)}


def caption(exact, localization, steps=100, train_s=60.0):
    return {"exact_match": exact, "bleu4": 100 * exact, "localization": localization,
            "params": 10, "steps": steps, "epochs": 3, "train_s": train_s, "cut_short": False,
            "settings": {"steps": steps, "lr": 0.002, "model": {"read_convs": 1}}}


def metadata(seed, profile="full"):
    return {"seed": seed, "profile": profile, "device": "cpu", "threads": 2,
            "machine": "x86_64, 2 cores, torch 2.13.0"}


def write(folder, name, result):
    """``name``.json; a captioning result in its file layout (each data set at the top)."""
    if name.startswith("captioning"):
        result = {**{k: v for k, v in result.items() if k != "models"}, **result["models"]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(result))


def good_seed(seed, none_long=20.0, digits_exact=0.97):
    """One seed's results, every target met (unless the arguments say otherwise)."""
    return {
        "bottleneck": {"models": {
            "none": translation(45.0, (95.0, 60.0, 40.0, none_long)),
            "bahdanau": translation(99.0, (99.5, 99.0, 99.0, 98.0), 0.97),
            "luong-general": translation(98.5, (99.5, 99.0, 98.0, 97.0), 0.98),
        }, **metadata(seed)},
        "captioning": {"models": {"digits": caption(digits_exact, 0.97, steps=4500),
                                  "shapes": caption(0.99, 0.85)}, "wall_s": 1.0,
                       **metadata(seed)},
        "transformer": {"models": {
            "transformer": translation(99.2, (99.8, 99.7, 99.6, 99.0), steps=3000),
            "bahdanau": translation(99.0, (99.5, 99.0, 99.0, 98.0), 0.97),
        }, **metadata(seed)},
    }


def test_every_target_holds_on_a_good_seed_and_fails_where_it_should():
    verdicts = {t.name: holds for t, _, _, holds in seed_targets(good_seed(0), TARGETS)}
    assert set(verdicts) == {t.name for t in TARGETS} and all(verdicts.values())
    # 31+ BLEU of the no-attention model must be at most half its 1-10 BLEU (95 → 47.5).
    bad = {t.name: (value, bound, holds)
           for t, value, bound, holds in seed_targets(good_seed(0, none_long=48.0), TARGETS)}
    assert bad["no attention: BLEU on 31+ words"] == (48.0, 47.5, False)
    # Bahdanau's 31+ must also be 2.5 × the no-attention model's: 98 < 2.5 × 48.
    assert bad["Bahdanau: BLEU on 31+ words vs no attention"][2] is False
    assert sum(holds is False for _, _, holds in bad.values()) == 2


def test_a_missing_experiment_is_unknown_not_passed():
    results = good_seed(0)
    del results["captioning"]
    checked = {t.name: holds for t, _, _, holds in seed_targets(results, TARGETS)}
    assert checked["digit strips: exact match"] is None
    assert checked["Bahdanau: BLEU overall"] is True


def test_single_model_runs_are_merged_and_other_profiles_left_out(tmp_path):
    seed0 = good_seed(0)
    folder = tmp_path / "seed-0"
    # `--model NAME` runs, one file each, and `--dataset NAME` runs beside a digits-only file.
    for name, entry in seed0["bottleneck"]["models"].items():
        write(folder, f"bottleneck-{name}", {"models": {name: entry}, **metadata(0)})
    captioning = seed0["captioning"]["models"]
    write(folder, "captioning", {"models": {"digits": captioning["digits"]}, **metadata(0)})
    write(folder, "captioning-shapes", {"models": {"shapes": captioning["shapes"]},
                                        **metadata(0)})
    write(folder, "transformer", seed0["transformer"])
    # A fast-profile seed and a stray folder are not the course's numbers.
    write(tmp_path / "seed-1", "transformer", {**seed0["transformer"], **metadata(1, "fast")})
    (tmp_path / "seed-x").mkdir()
    seeds = load_seeds(tmp_path)
    assert list(seeds) == [0]
    assert list(seeds[0]["bottleneck"]["models"]) == ["bahdanau", "luong-general", "none"]
    assert seeds[0]["captioning"]["models"] == captioning
    # The Transformer's file repeats the RNN records beside its own: they are not its models.
    assert list(seeds[0]["transformer"]["models"]) == ["transformer"]
    assert all(holds for _, _, _, holds in seed_targets(seeds[0], TARGETS))
    assert list(load_seeds(tmp_path, profile="fast")) == [1]


def test_the_page_reports_each_seed_and_the_spread(tmp_path):
    seeds = {0: good_seed(0, digits_exact=0.96), 3: good_seed(3, digits_exact=0.94)}
    for seed, results in seeds.items():
        for experiment, result in results.items():
            write(tmp_path / f"seed-{seed}", experiment, result)
    page = results_page(load_seeds(tmp_path))
    assert "Seeds measured: 0, 3." in page
    rows = {line.split(" | ")[0].strip("| "): line for line in page.splitlines()
            if line.startswith("| ")}
    # Seed 3 misses the digit target: the row says so, with both values.
    digits = rows["digit strips: exact match"]
    assert "0.960 ✓" in digits and "0.940 ✗" in digits and "**fails**" in digits
    assert "| -0.010 |" in digits  # the smallest margin: seed 3's, 0.94 − 0.95
    assert rows["Transformer: BLEU overall"].endswith("| holds |")
    # Mean, minimum and maximum over the seeds.
    assert rows["digits: exact match"] == "| digits: exact match | 2 | 0.950 | 0.940 | 0.960 |"
    assert rows["bahdanau: BLEU 31+"] == "| bahdanau: BLEU 31+ | 2 | 98.0 | 98.0 | 98.0 |"
    # Step budgets and measured minutes.
    assert rows["captioner (digits)"].startswith("| captioner (digits) | 4,500 |")
    assert rows["transformer"].startswith("| transformer | 3,000 |")
    # How each was made: per model, the command and the newest seed's settings, nested keys
    # spelled out, the seed and threads left to the tables.
    made = page.split("## How the numbers were made")[1]
    assert "- **captioning, digits**: `course reproduce captioning --dataset DATASET --seed N`." \
        " Settings (seed 3): `steps=4500`, `lr=0.002`, `model.read_convs=1`." in made
    assert "- **bottleneck, none**: `course reproduce bottleneck --model MODEL --seed N`. " \
        "Settings (seed 3): `model.hidden_size=256`, `train.steps=1000`." in made
    assert "- **transformer**: `course reproduce transformer --seed N`." in made


def test_each_model_shows_the_settings_of_its_own_record(tmp_path):
    """Models of one experiment differ in their settings (a width variant in its model's
    width): each line shows its own model's, from its own file."""
    for name, width in (("none", 256), ("none-512", 512)):
        record = {**translation(40.0, (90.0, 60.0, 40.0, 20.0)), "settings": settings(0, width)}
        write(tmp_path / "seed-0", f"bottleneck-{name}",
              {"models": {name: record}, **metadata(0)})
    page = results_page(load_seeds(tmp_path))
    lines = {line.split("**")[1]: line for line in page.splitlines() if line.startswith("- **")}
    assert "`model.hidden_size=256`" in lines["bottleneck, none"]
    assert "`model.hidden_size=512`" in lines["bottleneck, none-512"]


def test_a_file_with_one_run_wide_settings_gives_them_to_each_of_its_records(tmp_path):
    """Results written before the records held their own settings keep one copy beside the
    models; each record is read with it."""
    record = {k: v for k, v in translation(40.0, (90.0, 60.0, 40.0, 20.0)).items()
              if k != "settings"}
    write(tmp_path / "seed-0", "bottleneck-none",
          {"models": {"none": record}, **metadata(0), "settings": {"corpus_size": 7}})
    seeds = load_seeds(tmp_path)
    assert seeds[0]["bottleneck"]["models"]["none"]["settings"] == {"corpus_size": 7}
    assert "Settings (seed 0): `corpus_size=7`." in results_page(seeds)


@pytest.mark.parametrize("profile", ["fast"])
def test_a_page_of_another_profile_says_so(profile):
    page = results_page({0: good_seed(0)}, profile)
    assert f"in the {profile} profile" in page and "test the pipeline" in page


def test_the_readme_headline_and_the_page_are_generated_from_the_committed_results(tmp_path):
    """docs/results.md and README's table between the markers are what the committed results
    give (run `course results` after measuring), and a README without the markers is
    refused."""
    from pathlib import Path

    from course_lib.experiments.results_page import (
        HEADLINE_END,
        HEADLINE_START,
        headline_table,
        update_readme,
    )

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    block = readme.split(HEADLINE_START, 1)[1].split(HEADLINE_END, 1)[0].strip("\n")
    committed = load_seeds(root / "results")
    assert block == headline_table(committed, REGISTRY), "run `course results`"
    assert (root / "docs" / "results.md").read_text() == results_page(committed), \
        "run `course results`"
    seeds = {0: {"bottleneck": {"models": {"none": translation(40.0, (90.0, 60.0, 40.0,
                                                                      20.0))},
                                **metadata(0)}}}
    copy = tmp_path / "README.md"
    copy.write_text(f"intro\n{HEADLINE_START}\nold\n{HEADLINE_END}\nrest\n")
    update_readme(copy, seeds, REGISTRY)
    text = copy.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{HEADLINE_END}\nrest\n")
    assert "| GRU encoder–decoder, no attention | 1 | 40.0 | 90.0 | 20.0 |" in text
    assert "| Transformer | 0 | – | – | – |" in text
    copy.write_text("no markers\n")
    with pytest.raises(ValueError, match="headline markers"):
        update_readme(copy, seeds, REGISTRY)


def test_the_headline_counts_only_the_verdicts_that_occur():
    from course_lib.experiments.results_page import headline_table

    good = headline_table({0: good_seed(0), 1: good_seed(1)}, REGISTRY)
    assert good.endswith(f"over seeds 0, 1: {len(TARGETS)} hold on every seed.")
    one_bad = headline_table({0: good_seed(0), 1: good_seed(1, digits_exact=0.94)}, REGISTRY)
    assert one_bad.endswith(f"over seeds 0, 1: {len(TARGETS) - 1} hold on every seed; "
                            "1 fails on at least one seed.")


def test_every_committed_record_holds_the_config_its_model_was_built_from():
    """Each committed record's settings nest the complete model config: built again (shapes
    only), the model has the parameter count the record measured."""
    import torch

    from course_lib.experiments.translation import translator_class
    from course_lib.models import count_parameters
    from course_lib.models.captioner import ShowAttendTell
    from course_lib.models.transformer import Transformer

    model_class = {"bottleneck": translator_class, "captioning": lambda _: ShowAttendTell,
                   "transformer": lambda _: Transformer}
    root = Path(__file__).resolve().parent.parent
    checked = 0
    for seed, results in load_seeds(root / "results").items():
        for experiment, result in results.items():
            for name, record in result["models"].items():
                model = model_class[experiment](name)
                fields = {k: tuple(v) if isinstance(v, list) else v
                          for k, v in record["settings"]["model"].items()}
                with torch.device("meta"):
                    built = model(model.config_class(**fields))
                assert count_parameters(built) == record["params"], (seed, experiment, name)
                assert record["settings"]["seed"] == seed, (seed, experiment, name)
                checked += 1
    assert checked >= 5 * 6  # none, bahdanau, luong-general, two captioners, Transformer
