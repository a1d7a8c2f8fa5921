"""The training script's models and their data: what each one trains on, and which regime its step is in.

(numpy, torch and scikit-learn are imported where used, so the CLI can list
:data:`MODELS` without them.)

Nothing is downloaded.  The digits ship inside scikit-learn's wheel (1,797
8x8 images, a fixed 80/20 split); the click log of ``rec`` is generated
from a seed.

* ``mlp`` (4,810 parameters): 64 -> 64 -> 10 on the digits' pixels.  Its
  gradient fits in a few packets, so a step is bound by round trips and by
  the host's work, not by bytes.
* ``embbag`` (66,186 parameters): the digits' non-zero pixels as tokens
  (pixel x intensity, 1,024 of them) summed by an ``EmbeddingBag``.  A batch
  touches only its tokens' rows, so about 60% of the gradient's 128-value
  blocks are non-zero: sparse, but not sparse enough to skip much.
* ``wide`` (1,126,410 parameters): 64 -> 1024 -> 1024 -> 10 on the digits.
  A step sends 4.5 MB of dense gradient and computes for a few ms: on links
  of tens of Mbit/s it is bound by the link, where aggregating in the
  switch halves what each worker's link carries against a ring all-reduce.
* ``rec`` (1,056,962 parameters): a click-through model on a generated
  click log.  A sample is one id in each of ``FIELDS`` categorical fields of
  ``VOCAB`` values, drawn from a Zipf law (exponent ``ZIPF``) and numbered
  by frequency, as recommendation systems number their vocabularies: the
  most frequent ids share the first rows of a field.  One ``Embedding`` of
  ``FIELDS x VOCAB`` rows of ``REC_DIM`` values (1,048,576 parameters) feeds
  a small MLP that predicts the click.  A batch touches a few dozen rows, so
  the gradient is 4 MB of which a few percent of the blocks are non-zero:
  SwitchML sends all of it, OmniReduce only the blocks some worker holds.
"""

from __future__ import annotations

MODELS = ("mlp", "embbag", "wide", "rec")
LR = {"mlp": 0.1, "embbag": 0.2, "wide": 0.1, "rec": 0.5}   # SGD with momentum 0.9 (single-process runs)
VOCAB = 64 * 16                  # embbag: tokens (pixel x intensity)
DIM = 64                         # embbag: features per token
WIDE = 1024                      # wide: units of each hidden layer
FIELDS, FIELD_VOCAB, REC_DIM, ZIPF = 4, 8192, 32, 1.2    # rec
CLICKS_TRAIN, CLICKS_TEST = 2560, 1024


def digits(seed: int = 0):
    """(x_train, y_train, x_test, y_test) as float32 / int64 arrays: a fixed 80/20 split."""
    import numpy as np
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))
    x, y = (d.data[order] / 16.0).astype(np.float32), d.target[order].astype(np.int64)
    cut = int(0.8 * len(y))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def clicks(seed: int = 0, n_train: int = CLICKS_TRAIN, n_test: int = CLICKS_TEST):
    """A generated click log: (ids_train, y_train, ids_test, y_test).

    Each sample holds one id per field (a row of the shared embedding table:
    ``field * FIELD_VOCAB + rank``, the rank Zipf-distributed), and clicks
    (``y = 1``) when a hidden score of its ids, with a pairwise term between
    the first two fields and Gaussian noise, is positive.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, FIELD_VOCAB + 1) ** ZIPF
    p /= p.sum()
    n = n_train + n_test
    weight = rng.standard_normal((FIELDS, FIELD_VOCAB))
    rank = np.stack([rng.choice(FIELD_VOCAB, size=n, p=p) for _ in range(FIELDS)], axis=1)
    own = weight[np.arange(FIELDS), rank]
    score = own.sum(axis=1) + 0.8 * own[:, 0] * own[:, 1] + 0.5 * rng.standard_normal(n)
    ids = (rank + np.arange(FIELDS) * FIELD_VOCAB).astype(np.int64)
    y = (score > 0).astype(np.int64)
    return ids[:n_train], y[:n_train], ids[n_train:], y[n_train:]


def dataset(kind: str, seed: int = 0):
    """The training and test data of model ``kind``: (x_train, y_train, x_test, y_test)."""
    return clicks(seed) if kind == "rec" else digits(seed)


def tokens(x):
    """Non-zero pixels as tokens: (flat token ids, offsets) for ``EmbeddingBag``."""
    import numpy as np
    import torch

    q = np.rint(x * 16.0).astype(np.int64)         # intensities 0..16
    ids, offs = [], []
    for row in q:
        p = np.flatnonzero(row)
        offs.append(sum(len(i) for i in ids))
        ids.append(p * 16 + np.minimum(row[p], 16) - 1)
    return torch.from_numpy(np.concatenate(ids)), torch.tensor(offs, dtype=torch.int64)


def make_model(kind: str):
    import torch

    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    if kind == "wide":
        return nn.Sequential(nn.Linear(64, WIDE), nn.ReLU(), nn.Linear(WIDE, WIDE), nn.ReLU(), nn.Linear(WIDE, 10))

    class Bag(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = nn.EmbeddingBag(VOCAB, DIM, mode="sum")      # one row = one 64-value block
            nn.init.normal_(self.bag.weight, 0.0, 0.05)              # a sum of ~35 rows stays O(1)
            self.out = nn.Linear(DIM, 10)

        def forward(self, x):
            ids, offs = x
            return self.out(torch.relu(self.bag(ids, offs)))

    class Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(FIELDS * FIELD_VOCAB, REC_DIM)  # dense gradient, zero outside the batch's rows
            nn.init.normal_(self.emb.weight, 0.0, 0.2)
            self.top = nn.Sequential(nn.Linear(FIELDS * REC_DIM, 64), nn.ReLU(), nn.Linear(64, 2))

        def forward(self, ids):
            return self.top(self.emb(ids).reshape(len(ids), -1))

    return Rec() if kind == "rec" else Bag()


def parameters(kind: str) -> int:
    """The number of parameters of model ``kind`` (the elements of its gradient)."""
    return sum(p.numel() for p in make_model(kind).parameters())


def inputs(kind: str, x):
    """A batch of ``x`` as the model's input."""
    import torch

    return tokens(x) if kind == "embbag" else torch.from_numpy(x)


def evaluate(model, kind, x, y) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on ``x``, ``y``."""
    import torch

    with torch.no_grad():
        out = model(inputs(kind, x))
        loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(y)).item()
        acc = (out.argmax(1).numpy() == y).mean()
    return float(loss), float(acc)
