"""The stacks the harness times, each run in its own child process:
`python -m bench.stacks --stack STACK --config JSON` prints one JSON line of figures.

`peer`: sentence-transformers on PyTorch, its CoSENTLoss and fused AdamW (what
SentenceTransformerTrainer runs), tokenising each batch as its collator does.
`tensorflow` / `jax` / `torch`: keras-cosent, built by `build_keras_training` as
`keras-cosent train` builds it, trained by `model.fit`. Both train the packaged
all-MiniLM-L6-v2 with CoSENT scale 20, AdamW lr 2e-5, wd 0.01, on the same first
`pairs` STS-B train pairs in file order. Epoch 1 is warm-up (reported as `warmup_s`),
epoch 2 is timed; encoding: a first pass over the test sentences (per-shape
compilation included) then a timed second pass.
"""

import argparse
import json
import math
import time


def build_keras_training(encoder, s1, s2, labels, config):
    """Compiled model and its batches, as `keras-cosent train` builds them
    (`keras_cosent.training.build`), in file order so every stack sees the same batches."""
    from bench.common import keras_training

    setup = keras_training(encoder, s1, s2, labels, config["batch_size"],
                           packing=config["packing"])
    return setup.model, setup.batches


def _time(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_peer(config, s1, s2, labels, test_sentences, train):
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    from bench.common import minilm_path, peer_optimizer

    torch.manual_seed(config["seed"])
    model = SentenceTransformer(minilm_path(), device="cpu")
    model.max_seq_length = config["max_length"]
    out = {}
    if train:
        loss_fn = CoSENTLoss(model, scale=20.0)
        bs = config["batch_size"]
        # Two epochs, as `keras_training` builds the keras stacks: its schedule too.
        total = 2 * -(-len(s1) // bs)
        opt, sched = peer_optimizer(model, 2e-5, 0.01, total, round(0.1 * total))

        def epoch():
            model.train()
            losses = []
            for start in range(0, len(s1), bs):
                y = torch.tensor(labels[start:start + bs], dtype=torch.float32)
                features = [model.preprocess(s1[start:start + bs]),
                            model.preprocess(s2[start:start + bs])]
                loss = loss_fn(features, y)
                loss.backward()
                opt.step()
                sched.step()
                opt.zero_grad()
                losses.append((float(loss), len(y)))
            # The epoch's mean batch loss weighted by batch size, as Keras logs the
            # keras stacks' `loss` (the last batch's alone said little).
            return sum(value * n for value, n in losses) / sum(n for _, n in losses)

        out["warmup_s"], _ = _time(epoch)
        out["train_s"], out["final_loss"] = _time(epoch)
    model.eval()

    def encode():
        return model.encode(test_sentences, batch_size=config["encode_batch_size"],
                            normalize_embeddings=True, convert_to_numpy=True)

    out["encode_first_s"], _ = _time(encode)
    out["encode_s"], emb = _time(encode)
    out["embedding_dim"] = int(emb.shape[1])
    return out


def run_keras(config, s1, s2, labels, test_sentences, train):
    import keras

    import keras_cosent
    from bench.common import minilm_path

    keras.utils.set_random_seed(config["seed"])
    encoder = keras_cosent.models.SentenceEncoder.from_checkpoint(
        minilm_path(), pooling="mean", max_length=config["max_length"])
    out = {}
    if train:
        tokenise, (model, batches) = _time(
            lambda: build_keras_training(encoder, s1, s2, labels, config))
        warm, _ = _time(lambda: model.fit(batches, epochs=1, verbose=0, shuffle=False))
        timed, hist = _time(lambda: model.fit(batches, epochs=1, verbose=0, shuffle=False))
        # the peer tokenises inside its epoch: both figures include tokenisation
        out["warmup_s"], out["train_s"] = warm + tokenise, timed + tokenise
        out["final_loss"] = float(hist.history["loss"][-1])

    def encode():
        return encoder.encode(test_sentences, batch_size=config["encode_batch_size"])

    out["encode_first_s"], _ = _time(encode)
    out["encode_s"], emb = _time(encode)
    out["embedding_dim"] = int(emb.shape[1])
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stack", required=True, choices=["peer", "tensorflow", "jax", "torch"])
    p.add_argument("--config", required=True, help="JSON: the harness's config")
    p.add_argument("--toggles", default="{}", help="JSON: {piece: true|false}")
    p.add_argument("--no-train", dest="train", action="store_false")
    args = p.parse_args(argv)
    config, toggles = json.loads(args.config), json.loads(args.toggles)
    pieces = {}
    if args.stack != "peer":
        from bench.toggles import apply

        pieces = apply(toggles, args.stack)
    from bench.common import peak_rss_mib, read_sts_pairs

    s1, s2, labels = read_sts_pairs("train", limit=config["pairs"])
    t1, t2, _ = read_sts_pairs("test", limit=config.get("encode_pairs"))
    test_sentences = list(t1) + list(t2)
    if args.stack == "peer":
        out = run_peer(config, s1, s2, labels, test_sentences, args.train)
    else:
        out = run_keras(config, s1, s2, labels, test_sentences, args.train)
    if args.train:
        out["train_pairs_per_s"] = len(s1) / out["train_s"]
    out["encode_sentences"] = len(test_sentences)
    out["encode_sentences_per_s"] = len(test_sentences) / out["encode_s"]
    out["encode_first_sentences_per_s"] = len(test_sentences) / out["encode_first_s"]
    out["peak_rss_mib"] = peak_rss_mib()
    assert all(math.isfinite(v) for v in out.values() if isinstance(v, float)), out
    print(json.dumps({"figures": out, "pieces": pieces}), flush=True)


if __name__ == "__main__":
    main()
