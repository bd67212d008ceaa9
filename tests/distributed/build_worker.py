"""Builds training setups inside `data_parallel(2)`; run as a script, one process per rank.

`tests/distributed/test_build.py` starts it in a fresh process (under
`torchrun --nproc_per_node 2` on PyTorch), for the reasons
`tests/distributed/worker.py` gives.

    python tests/distributed/build_worker.py OUT_DIR

writes from rank 0 `OUT_DIR/result.json`:

- `rows`: the rows, identified by their label, that the devices train on in
  the first epoch of `build(..., seed=None)`, every rank's slices together.
  Each process seeds NumPy's global generator differently first, as separate
  processes' generators are, so that each would draw its own shuffle seed.
- `seeds`: the shuffle seed each rank's batches use.
- `build_multi_error`: what `build_multi` raised inside `data_parallel(2)`
  (`null` if it did not).
- `outside_error`: what `build` raised inside `data_parallel(2)` for an encoder
  created before it (`null` if it did not).
- `losses`: the epoch loss of one `fit` of the built set-up.
"""

import json
import os
import sys

import numpy as np

ROWS = 16
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat"]


def main(out):
    from tests.distributed.worker import _split_cpu

    _split_cpu()
    import keras
    import keras_hub

    import keras_cosent
    from keras_cosent import distributed

    words = ["a", "cat", "dog", "sat"]
    rng = np.random.default_rng(0)
    pairs = keras_cosent.data.PairDataset(
        [[" ".join(rng.choice(words, 3)) for _ in range(ROWS)],
         [" ".join(rng.choice(words, 2)) for _ in range(ROWS)]],
        np.arange(ROWS, dtype="float32") / 4,  # row i's label is i / 4: it names the row
        source="inline",
    )
    def make_encoder():
        return keras_cosent.models.SentenceEncoder(
            keras_hub.models.BertBackbone(vocabulary_size=len(VOCAB), num_layers=1, num_heads=2,
                                          hidden_dim=8, intermediate_dim=16,
                                          max_sequence_length=16),
            keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True), max_length=16)

    created_before = make_encoder()
    with distributed.data_parallel(2):
        try:
            keras_cosent.training.build(created_before, pairs, "cosent", batch_size=4, epochs=1)
            outside_error = None
        except ValueError as error:
            outside_error = str(error)
        np.random.seed(1000 + distributed.rank())
        encoder = make_encoder()
        setup = keras_cosent.training.build(encoder, pairs, "cosent", batch_size=4, epochs=1,
                                            devices=2, seed=None)
        labels = np.concatenate([np.asarray(setup.batches[i][1]).ravel()
                                 for i in range(len(setup.batches))])
        # PyTorch and TensorFlow feed `fit` a ShardedBatches over the PairBatches.
        pair_batches = getattr(setup.batches, "batches", setup.batches)
        mine = (np.rint(labels * 4).astype(int).tolist(), int(pair_batches.seed))
        try:
            keras_cosent.training.build_multi(encoder, [(pairs, "cosent")], batch_size=4,
                                              epochs=1)
            build_multi_error = None
        except ValueError as error:
            build_multi_error = str(error)
        # The set-up trains as built (AdamW and its schedule): on TensorFlow, fit's
        # check of the schedule could not read the mirrored step counter.
        losses = setup.model.fit(setup.batches, epochs=1, verbose=0).history["loss"]

    if keras.backend.backend() == "torch":  # one process per rank
        import torch.distributed as dist

        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
    else:
        everyone = [mine]
    if distributed.rank() == 0:
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump({"rows": sorted(row for rows, _ in everyone for row in rows),
                       "seeds": [seed for _, seed in everyone],
                       "build_multi_error": build_multi_error, "losses": losses,
                       "outside_error": outside_error}, f)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(sys.argv[1])
