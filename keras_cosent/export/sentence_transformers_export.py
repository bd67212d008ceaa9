"""Writing a BERT `SentenceEncoder` as a sentence-transformers / Hugging Face folder.

The folder is what sentence-transformers saves: a `transformers` `BertModel`
(`config.json`, `model.safetensors`), its tokenizer (`vocab.txt`,
`tokenizer_config.json`) and the module stack Transformer -> Pooling ->
Normalize (`modules.json`, `sentence_bert_config.json`, `1_Pooling/`,
`2_Normalize/`). `SentenceTransformer(folder)` embeds as the encoder does, and
so does anything that reads that format (`transformers.AutoModel` for the
token states, keras-cosent's own `load_encoder`).

The weight names and layouts are those keras-hub's Hugging Face BERT
converter reads (`keras_hub/src/utils/transformers/convert_bert.py`), in
reverse: attention kernels `(hidden, heads, head_dim)` become `(out, in)`
matrices, dense kernels are transposed.
"""

import json
import os
import shutil
import tempfile
import warnings

import numpy as np

# sentence-transformers' Pooling flags for our pooling names (first_last_avg has none).
_POOLING_FLAGS = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
    "weighted_mean": "pooling_mode_weightedmean_tokens",
}

# Paths of a keras-hub TransformerEncoder's weights, relative to the layer, and
# the Hugging Face names (after `encoder.layer.{i}.`) they are written under.
_LAYER_WEIGHTS = {
    "self_attention_layer/query/kernel": "attention.self.query.weight",
    "self_attention_layer/query/bias": "attention.self.query.bias",
    "self_attention_layer/key/kernel": "attention.self.key.weight",
    "self_attention_layer/key/bias": "attention.self.key.bias",
    "self_attention_layer/value/kernel": "attention.self.value.weight",
    "self_attention_layer/value/bias": "attention.self.value.bias",
    "self_attention_layer/attention_output/kernel": "attention.output.dense.weight",
    "self_attention_layer/attention_output/bias": "attention.output.dense.bias",
    "self_attention_layer_norm/gamma": "attention.output.LayerNorm.weight",
    "self_attention_layer_norm/beta": "attention.output.LayerNorm.bias",
    "feedforward_intermediate_dense/kernel": "intermediate.dense.weight",
    "feedforward_intermediate_dense/bias": "intermediate.dense.bias",
    "feedforward_output_dense/kernel": "output.dense.weight",
    "feedforward_output_dense/bias": "output.dense.bias",
    "feedforward_layer_norm/gamma": "output.LayerNorm.weight",
    "feedforward_layer_norm/beta": "output.LayerNorm.bias",
}


def _numpy(variable):
    import keras

    return np.asarray(keras.ops.convert_to_numpy(variable), dtype="float32")


def _as_matrix(kernel, hidden_dim):
    # Dense kernels are (in, out) and attention kernels (in, heads, head_dim) or
    # (heads, head_dim, out): Hugging Face's Linear weight is (out, in).
    return np.ascontiguousarray(kernel.reshape(hidden_dim, -1).T if kernel.ndim == 3 else kernel.T)


def bert_state_dict(backbone):
    """The weights of a keras-hub `BertBackbone` under `transformers`' `BertModel` names.

    Args:
        backbone: a `keras_hub.models.BertBackbone`.

    Returns:
        dict of str -> float32 numpy array, the state dict of a `BertModel`
        (pooler included).
    """
    hidden = int(backbone.hidden_dim)
    state = {}
    for name, key, attribute in (
        ("token_embedding", "embeddings.word_embeddings.weight", "embeddings"),
        ("position_embedding", "embeddings.position_embeddings.weight", "position_embeddings"),
        ("segment_embedding", "embeddings.token_type_embeddings.weight", "embeddings"),
    ):
        state[key] = _numpy(getattr(backbone.get_layer(name), attribute))
    norm = backbone.get_layer("embeddings_layer_norm")
    state["embeddings.LayerNorm.weight"] = _numpy(norm.gamma)
    state["embeddings.LayerNorm.bias"] = _numpy(norm.beta)
    for i in range(int(backbone.num_layers)):
        block = backbone.get_layer(f"transformer_layer_{i}")
        found = {}
        for variable in block.weights:
            relative = variable.path.split(f"{block.name}/", 1)[-1]
            if relative in _LAYER_WEIGHTS:
                found[relative] = variable
        missing = sorted(set(_LAYER_WEIGHTS) - set(found))
        if missing:
            raise ValueError(f"{block.name} of the backbone has no weight {missing[0]!r}; "
                             "expected a keras-hub BertBackbone's TransformerEncoder")
        for relative, key in _LAYER_WEIGHTS.items():
            value = _numpy(found[relative])
            # Attention biases are (heads, head_dim): flatten every bias to (out,).
            value = _as_matrix(value, hidden) if relative.endswith("kernel") else value.reshape(-1)
            state[f"encoder.layer.{i}.{key}"] = value
    pooler = backbone.get_layer("pooled_dense")
    state["pooler.dense.weight"] = _as_matrix(_numpy(pooler.kernel), hidden)
    state["pooler.dense.bias"] = _numpy(pooler.bias)
    return state


def _tokenizer_files(tokenizer, max_length):
    from keras_cosent.models.hf_bert_tokenizer import HFBertTokenizer

    lowercase = tokenizer.hf_lowercase if isinstance(tokenizer, HFBertTokenizer) \
        else bool(tokenizer.lowercase)
    vocabulary = list(tokenizer.get_vocabulary())
    # `_check_encoder` made sure this is a keras-hub BertTokenizer: all are set.
    special = {
        "cls_token": tokenizer.cls_token,
        "sep_token": tokenizer.sep_token,
        "pad_token": tokenizer.pad_token,
        "mask_token": tokenizer.mask_token,
        "unk_token": tokenizer.oov_token,
    }
    config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": lowercase,
        "strip_accents": bool(tokenizer.strip_accents),
        "tokenize_chinese_chars": bool(tokenizer.split_on_cjk),
        "model_max_length": int(max_length),
        **special,
    }
    return vocabulary, config, special


def _write_json(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")


def _check_encoder(encoder):
    import keras_hub

    if not isinstance(encoder.backbone, keras_hub.models.BertBackbone):
        raise ValueError(
            f"Only BERT encoders can be written as a sentence-transformers folder; this "
            f"encoder's backbone is `{type(encoder.backbone).__name__}`"
        )
    if not isinstance(encoder.tokenizer, keras_hub.models.BertTokenizer):
        raise ValueError(
            "The encoder needs its BERT WordPiece tokenizer to be written as a "
            f"sentence-transformers folder; it has {type(encoder.tokenizer).__name__}"
        )
    from keras_cosent.models.hf_bert_tokenizer import HFBertTokenizer

    if not isinstance(encoder.tokenizer, HFBertTokenizer):
        warnings.warn(
            "The encoder's tokenizer is keras-hub's BertTokenizer, which cleans and "
            "lowercases text otherwise than transformers' (NFKC case folding; spaces, "
            "control and zero-width characters, NUL): the folder gives other token ids, "
            "so other embeddings, on text that holds such characters. An encoder read "
            "from a Hugging Face checkpoint has an HFBertTokenizer, which matches.",
            stacklevel=3,
        )
    if encoder.pooling not in _POOLING_FLAGS:
        raise ValueError(
            f"pooling={encoder.pooling!r} has no sentence-transformers Pooling mode; "
            f"expected one of {sorted(_POOLING_FLAGS)}"
        )


def export_sentence_transformers(encoder_or_path, directory, overwrite=False, truncate_dim=None):
    """Writes a BERT sentence encoder as a sentence-transformers folder.

    `SentenceTransformer(directory)` then embeds as the encoder does (the
    same tokens, the same pooling, L2-normalised): to float round-off when
    the encoder uses the exact GELU that Hugging Face BERT checkpoints are
    trained with (`hidden_act: "gelu"`; encoders read from such checkpoints
    do), else with `hidden_act: "gelu_new"`, the tanh approximation keras-hub
    builds. A keras-hub `BertTokenizer` cleans and lowercases text otherwise
    than `transformers` (NFKC case folding; spaces, control and zero-width
    characters), so only an `HFBertTokenizer` (which every encoder read from a
    Hugging Face checkpoint has) gives the same token ids on every text; with
    the other, the export warns.

    The folder is written beside its final place and renamed into it, so an
    error leaves nothing half-written.

    Args:
        encoder_or_path: a `keras_cosent.models.SentenceEncoder` on a keras-hub
            `BertBackbone`, or anything `keras_cosent.models.load_encoder`
            reads (a `.keras` file, a `keras-cosent train` run directory).
        directory: the folder to write.
        overwrite: replace an existing non-empty `directory`; otherwise it
            raises `FileExistsError`.
        truncate_dim: `None`, or an int in `[1, embedding dim]`, written as
            the folder's `truncate_dim` (for models trained with
            `matryoshka_dims`): sentence-transformers then returns the first
            `truncate_dim` coordinates of the unit-length embedding without
            re-normalising them, so its vectors point as
            `encode(truncate_dim=...)`'s do (the same cosines) but are shorter
            than unit length.

    Returns:
        The absolute path of the written folder, as a string.

    Raises:
        ValueError: for a backbone other than `BertBackbone`, an encoder
            without a BERT tokenizer, or `first_last_avg` pooling (which
            sentence-transformers has no module for).

    Example:

    >>> import os
    >>> import tempfile
    >>> import keras_hub
    >>> import keras_cosent
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "sat"]
    >>> encoder = keras_cosent.models.SentenceEncoder(
    ...     keras_hub.models.BertBackbone(vocabulary_size=len(vocab), num_layers=1,
    ...         num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16),
    ...     keras_cosent.models.HFBertTokenizer(vocabulary=vocab, lowercase=True),
    ...     max_length=16)
    >>> folder = keras_cosent.export.export_sentence_transformers(
    ...     encoder, tempfile.mkdtemp() + "/st")
    >>> sorted(os.listdir(folder))  # doctest: +NORMALIZE_WHITESPACE
    ['1_Pooling', '2_Normalize', 'config.json', 'config_sentence_transformers.json',
     'model.safetensors', 'modules.json', 'sentence_bert_config.json',
     'tokenizer_config.json', 'vocab.txt']
    """
    from safetensors.numpy import save_file

    from keras_cosent.models.checkpoints import write_vocab_txt
    from keras_cosent.models.encoder_loading import load_encoder
    from keras_cosent.utils.truncation import check_truncate_dim

    encoder = encoder_or_path
    if isinstance(encoder_or_path, (str, os.PathLike)):
        encoder = load_encoder(encoder_or_path)
    _check_encoder(encoder)
    truncate_dim = check_truncate_dim(truncate_dim, encoder.embedding_dim)
    directory = os.path.abspath(os.fspath(directory))
    if os.path.exists(directory):
        if not os.path.isdir(directory):
            raise NotADirectoryError(f"`directory` {directory} exists and is not a directory")
        if os.listdir(directory) and not overwrite:
            raise FileExistsError(f"{directory} already exists and is not empty; pass "
                                  "`overwrite=True` to replace it")
    backbone = encoder.backbone
    vocabulary, tokenizer_config, special = _tokenizer_files(encoder.tokenizer, encoder.max_length)
    if len(vocabulary) != int(backbone.vocabulary_size):
        raise ValueError(f"The tokenizer has {len(vocabulary)} tokens and the backbone "
                         f"{backbone.vocabulary_size} token embeddings; expected the same")
    bert_config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": int(backbone.vocabulary_size),
        "hidden_size": int(backbone.hidden_dim),
        "num_hidden_layers": int(backbone.num_layers),
        "num_attention_heads": int(backbone.num_heads),
        "intermediate_size": int(backbone.intermediate_dim),
        "hidden_act": "gelu" if encoder.exact_gelu else "gelu_new",
        "hidden_dropout_prob": float(backbone.dropout),
        "attention_probs_dropout_prob": float(backbone.dropout),
        "max_position_embeddings": int(backbone.max_sequence_length),
        "type_vocab_size": int(backbone.num_segments),
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": vocabulary.index(special["pad_token"])
        if special["pad_token"] in vocabulary else 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }
    pooling = {"word_embedding_dimension": int(backbone.hidden_dim)}
    pooling.update({flag: name == encoder.pooling for name, flag in _POOLING_FLAGS.items()})
    pooling.update({"pooling_mode_lasttoken": False, "include_prompt": True})
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"},
    ]

    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    # Beside the target, so the renames below stay on one filesystem.
    staging = tempfile.mkdtemp(prefix=f".tmp-{os.path.basename(directory)}-", dir=parent)
    try:
        out = os.path.join(staging, "folder")
        os.makedirs(os.path.join(out, "1_Pooling"))
        os.makedirs(os.path.join(out, "2_Normalize"))
        save_file(bert_state_dict(backbone), os.path.join(out, "model.safetensors"),
                  metadata={"format": "pt"})
        _write_json(os.path.join(out, "config.json"), bert_config)
        write_vocab_txt(os.path.join(out, "vocab.txt"), vocabulary, "the encoder's tokenizer")
        _write_json(os.path.join(out, "tokenizer_config.json"), tokenizer_config)
        _write_json(os.path.join(out, "modules.json"), modules)
        _write_json(os.path.join(out, "sentence_bert_config.json"),
                    {"max_seq_length": int(encoder.max_length), "do_lower_case": False})
        _write_json(os.path.join(out, "1_Pooling", "config.json"), pooling)
        st_config = {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}
        if truncate_dim is not None:
            st_config["truncate_dim"] = truncate_dim
        _write_json(os.path.join(out, "config_sentence_transformers.json"), st_config)
        if os.path.exists(directory):
            # rename cannot replace a non-empty directory: move the old one aside.
            os.rename(directory, os.path.join(staging, "replaced"))
        os.rename(out, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory
