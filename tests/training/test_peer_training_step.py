"""keras-cosent's InfoNCE training, step for step against sentence-transformers' MNRL.

The packaged all-MiniLM-L6-v2, the same batches, dropout off on both sides (the
one part of a training step that draws random numbers): `build(...,
"infonce")` trained with `train_on_batch` must give the losses and the weights
that `MultipleNegativesRankingLoss(scale=20)` gives with `torch.optim.AdamW` and
Hugging Face's linear warm-up schedule, as sentence-transformers trains. Its
losses are about 1e-3, gradients are as small as AdamW's epsilon, and Keras' own
AdamW (epsilon placed before the bias correction) takes visibly smaller steps:
the control below shows the check would see it.
"""

import keras
import numpy as np
import pytest

from keras_cosent.data import PairDataset
from keras_cosent.models import SentenceEncoder
from keras_cosent.optimizers import NO_WEIGHT_DECAY
from keras_cosent.optimizers import WarmupLinearDecay
from keras_cosent.training import build

PAIRS = [
    ("A man is playing a guitar.", "A man plays the guitar."),
    ("A woman is slicing an onion.", "A woman cuts an onion."),
    ("Two dogs run across a field.", "Two dogs are running through the grass."),
    ("The stock market fell sharply today.", "Shares dropped steeply on Monday."),
    ("A child is riding a bicycle.", "A kid rides a bike."),
    ("The chef is cooking pasta.", "A cook prepares spaghetti."),
    ("It is raining in the city.", "Rain falls over the town."),
    ("A cat sleeps on the sofa.", "A cat is napping on the couch."),
    ("The train arrived late.", "The train was delayed."),
    ("Scientists discovered a new planet.", "Astronomers found a new exoplanet."),
    ("He is reading a newspaper.", "A man reads the paper."),
    ("The team won the final match.", "The side won the championship game."),
]
HELD_OUT = ["A boy is playing football.", "The weather is cold today.",
            "Prices rose again last month.", "A bird sits on a branch."]
STEPS_PER_EPOCH, EPOCHS, BATCH, LR, SEED = 3, 2, 4, 2e-5, 0
MAX_LENGTH = 32


def no_dropout(encoder):
    for layer in encoder._flatten_layers(include_self=True, recursive=True):
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
        if isinstance(layer, keras.layers.MultiHeadAttention):
            layer._dropout = 0.0
    return encoder


# Graded scores for the CoSENT runs: its gradients on these batches have norms far
# above 1, where sentence-transformers' trainer clips (max_grad_norm=1.0).
SCORES = np.array([5.0, 0.5, 4.0, 1.0, 3.5, 2.0, 0.0, 4.5, 3.0, 1.5, 2.5, 5.0], "float32")


def keras_run(minilm_path, optimizer=None, objective="infonce", max_grad_norm=None):
    encoder = no_dropout(SentenceEncoder.from_checkpoint(minilm_path, max_length=MAX_LENGTH))
    scores = np.full(len(PAIRS), 5.0, "float32") if objective == "infonce" else SCORES
    data = PairDataset([[a for a, _ in PAIRS], [b for _, b in PAIRS]], scores, "pairs")
    setup = build(encoder, data, objective, batch_size=BATCH, epochs=EPOCHS,
                  learning_rate=LR, warmup=0.1, weight_decay=0.01, seed=SEED,
                  max_grad_norm=max_grad_norm)
    if optimizer is not None:
        total = len(setup.batches) * EPOCHS
        schedule = WarmupLinearDecay(LR, total, warmup_steps=round(0.1 * total))
        setup.model.compile(optimizer=optimizer(schedule), loss=setup.loss)
    plan, losses = [], []
    for epoch in range(EPOCHS):
        setup.batches.set_epoch(epoch)
        for index in range(len(setup.batches)):
            plan.append([int(i) for i in setup.batches._batches[index]])
            x, y = setup.batches[index]
            losses.append(float(setup.model.train_on_batch(x, y)))
    held_out = np.asarray(encoder.encode(HELD_OUT))
    return plan, losses, held_out / np.linalg.norm(held_out, axis=1, keepdims=True)


def peer_run(minilm_path, plan, objective="infonce", max_grad_norm=None):
    import sentence_transformers as st
    import torch
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import get_linear_schedule_with_warmup

    model = st.SentenceTransformer(str(minilm_path), device="cpu")
    model.max_seq_length = MAX_LENGTH
    model.eval()  # dropout off; gradients still flow
    if objective == "infonce":
        loss_fn, labels = MultipleNegativesRankingLoss(model, scale=20.0), None
    else:
        loss_fn, labels = CoSENTLoss(model, scale=20.0), torch.tensor(SCORES)
    named = list(model.named_parameters())
    no_decay = [p for n, p in named if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in named if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=LR)
    schedule = get_linear_schedule_with_warmup(optimizer, round(0.1 * len(plan)), len(plan))
    losses = []
    for rows in plan:
        features = [model.preprocess([PAIRS[i][c] for i in rows]) for c in (0, 1)]
        loss = loss_fn(features, torch.zeros(len(rows)) if labels is None else labels[rows])
        loss.backward()
        if max_grad_norm is not None:  # where the trainer clips: after backward, before step
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, model.encode(HELD_OUT, normalize_embeddings=True, convert_to_numpy=True)


def assert_same_steps(minilm_path, objective="infonce", max_grad_norm=None, atol=1e-6):
    """Trains both sides on the same plan; returns the peer's held-out embeddings and
    the gap between the two sides' (asserted small against how far the steps moved)."""
    plan, losses, held_out = keras_run(minilm_path, objective=objective,
                                       max_grad_norm=max_grad_norm)
    assert len(plan) == STEPS_PER_EPOCH * EPOCHS
    peer_losses, peer_held_out = peer_run(minilm_path, plan, objective=objective,
                                          max_grad_norm=max_grad_norm)
    # train_on_batch resets the loss tracker: each value is that step's loss.
    np.testing.assert_allclose(losses, peer_losses, rtol=2e-3, atol=atol)
    zero_shot = np.asarray(SentenceEncoder.from_checkpoint(minilm_path, max_length=MAX_LENGTH)
                           .encode(HELD_OUT))
    zero_shot /= np.linalg.norm(zero_shot, axis=1, keepdims=True)
    moved = np.abs(peer_held_out - zero_shot).max()
    gap = np.abs(held_out - peer_held_out).max()
    assert moved > 1e-4  # the steps did move the model
    assert gap < 0.02 * moved
    return peer_held_out, gap


@pytest.mark.heavy
def test_infonce_steps_match_sentence_transformers(minilm_path):
    peer_held_out, gap = assert_same_steps(minilm_path)

    # Control: Keras' own AdamW on the same schedule and batches ends measurably apart.
    def keras_adamw(schedule):
        optimizer = keras.optimizers.AdamW(learning_rate=schedule, weight_decay=0.01)
        optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
        return optimizer

    _, _, keras_rule = keras_run(minilm_path, optimizer=keras_adamw)
    assert np.abs(keras_rule - peer_held_out).max() > 10 * gap


@pytest.mark.heavy
def test_clipped_cosent_steps_match_sentence_transformers_trainer_default(minilm_path):
    # max_grad_norm=1.0, as sentence-transformers' trainer clips by default.
    peer_held_out, gap = assert_same_steps(minilm_path, "cosent", max_grad_norm=1.0, atol=1e-5)
    # Control: the same run unclipped ends measurably apart from the clipped peer.
    _, _, unclipped = keras_run(minilm_path, objective="cosent")
    assert np.abs(unclipped - peer_held_out).max() > 10 * gap
