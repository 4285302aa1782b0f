"""Greedy decoding with and without the KV cache, by batch size and length, on the GPU and on
the CPU of the machine it runs on: where is the cache faster, and how large must the batch be
before a step is bound by arithmetic rather than by its fixed cost?

    python tools/kv_cache_by_batch.py OUT_DIR

writes ``kv-cache-<device>.json`` files in the format of ``results/gpu/`` (one per device),
which ``course bench`` reads into docs/performance.md and lesson 11 plots.
"""

import json
import sys
from datetime import date
from pathlib import Path

import torch

from course_lib.lessons.costs import decode_timing
from course_lib.models.transformer import Transformer, TransformerConfig

CONFIG = {"vocabulary": 300, "d_model": 128, "heads": 4, "layers": "2 + 2", "d_ff": 512,
          "source tokens": 32, "repeats": 3, "weights": "untrained"}
TOKENS = [128, 256, 512]


def measure(device: torch.device, batches: list[int]) -> list[dict]:
    torch.manual_seed(0)
    config = TransformerConfig(300, 300, d_model=128, num_heads=4, num_encoder_layers=2,
                               num_decoder_layers=2, d_ff=512, dropout=0.0, norm_first=True,
                               max_len=1024)
    model = Transformer(config).to(device).eval()
    rows = []
    for batch in batches:
        generator = torch.Generator().manual_seed(batch)
        src = torch.randint(4, 300, (batch, 32), generator=generator).to(device)  # (B, S)
        lengths = torch.full((batch,), 32, device=device)
        for row in decode_timing(model, src, lengths, TOKENS, repeats=3):
            rows.append({"batch": batch, "tokens": row["tokens"],
                         "cached_s": round(row["cached_s"], 4),
                         "uncached_s": round(row["uncached_s"], 4),
                         "speedup": round(row["speedup"], 2), "same_tokens": row["same_tokens"]})
    return rows


def main(out_dir: Path) -> None:
    """``kv-cache-GPU-gpu.json`` and ``kv-cache-GPU-host-cpu.json`` (GPU: the card's model, as
    in ``h200``), or ``kv-cache-cpu.json`` on a machine without a GPU."""
    threads = f"{torch.get_num_threads()} threads"
    runs = [("cpu", f"CPU, {threads}", [4, 64], "cpu")]
    if torch.cuda.is_available():
        card = torch.cuda.get_device_name()
        short = card.split()[-1].lower()
        runs = [("cuda", card, [4, 64, 256, 1024], f"{short}-gpu"),
                ("cpu", f"the CPU of the {card.split()[-1]} machine, {threads}", [4, 64],
                 f"{short}-host-cpu")]
    for kind, name, batches, stem in runs:
        measurement = {"device": name, "measured": date.today().isoformat(),
                       "torch": torch.__version__, "command": "python tools/kv_cache_by_batch.py",
                       "config": CONFIG, "rows": measure(torch.device(kind), batches)}
        (out_dir / f"kv-cache-{stem}.json").write_text(json.dumps(measurement, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
