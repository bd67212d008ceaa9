"""Reading the settings of a sentence-transformers folder.

A sentence-transformers checkpoint folder carries, besides the Hugging Face
files, `modules.json` (its module stack), `sentence_bert_config.json`
(`max_seq_length`, `do_lower_case`; version 6 keeps the length in the
tokenizer's `model_max_length` instead) and one folder per module, e.g.
`1_Pooling/config.json` (the pooling mode) and `2_Normalize`.
`read_sentence_transformers_config` turns them into the options of
`keras_cosent.models.SentenceEncoder` so the encoder embeds as
sentence-transformers does, and refuses stacks it cannot reproduce with a
`ValueError` naming the module.

`SentenceEncoder` always L2-normalises its embeddings: a stack without a
`Normalize` module gives embeddings that differ from the peer's only in norm
(cosine similarities are the same).
"""

import math
import os
import warnings

from keras_cosent.models.checkpoints import load_json_file

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"

# sentence-transformers' `pooling_mode_*` flags -> keras-cosent pooling names.
_POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weighted_mean",
}
_REFUSED_POOLING_MODES = ("pooling_mode_lasttoken",)


def _short_type(module_type):
    # sentence-transformers >= 3 also writes e.g. "sentence_transformers.models.Pooling"
    # or the newer "sentence_transformers.sentence_transformer.modules.Pooling".
    return str(module_type).rsplit(".", 1)[-1]


def pooling_from_config(config, path="1_Pooling/config.json"):
    """Maps a sentence-transformers Pooling config onto a keras-cosent pooling name.

    Args:
        config: dict, the content of the Pooling module's `config.json`.
        path: str, where it was read (for error messages).

    Returns:
        One of `"cls"`, `"mean"`, `"max"`, `"mean_sqrt_len"`, `"weighted_mean"`.

    Raises:
        ValueError: for last-token pooling, for several modes at once
            (sentence-transformers concatenates them), for none, or for
            `include_prompt: false`.
    """
    if config.get("pooling_mode") is not None and not any(k in config for k in _POOLING_MODES):
        # Newer configs may name the mode directly, or a list of modes, which
        # sentence-transformers concatenates (one alone is that mode).
        mode = config["pooling_mode"]
        if isinstance(mode, list):
            if len(mode) != 1:
                raise ValueError(
                    f"{path}: pooling_mode {mode!r} names {len(mode)} modes (combined "
                    "pooling modes are concatenated by sentence-transformers and not "
                    f"supported); expected one of {sorted(_POOLING_MODES.values())}")
            mode = mode[0]
        mode = str(mode).replace("weightedmean", "weighted_mean")
        mode = {"mean_sqrt_len_tokens": "mean_sqrt_len"}.get(mode, mode)
        if mode not in _POOLING_MODES.values():
            raise ValueError(f"{path}: pooling_mode {config['pooling_mode']!r} is not supported; "
                             f"expected one of {sorted(_POOLING_MODES.values())}")
        modes = [mode]
    else:
        for key in _REFUSED_POOLING_MODES:
            if config.get(key):
                raise ValueError(f"{path}: `{key}: true` (last-token pooling) is not supported; "
                                 f"expected one of {sorted(_POOLING_MODES)}")
        modes = [name for key, name in _POOLING_MODES.items() if config.get(key)]
    if len(modes) != 1:
        raise ValueError(
            f"{path}: expected exactly one of {sorted(_POOLING_MODES)} to be true, found "
            f"{modes or 'none'} (combined pooling modes are concatenated by "
            "sentence-transformers and not supported)"
        )
    if config.get("include_prompt", True) is False:
        raise ValueError(f"{path}: `include_prompt: false` is not supported; expected true")
    return modes[0]


def _tokenizer_max_length(module_dir):
    """`model_max_length` of `tokenizer_config.json`, or None when absent or unset.

    `transformers` writes a huge number (`int(1e30)`) for "no limit"; such a
    value, or anything above 1,000,000 tokens, reads as unset.
    """
    path = os.path.join(module_dir, "tokenizer_config.json")
    if not os.path.isfile(path):
        return None
    value = load_json_file(path).get("model_max_length")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1_000_000:
        return None
    return value


def read_sentence_transformers_config(folder):
    """Reads the encoding settings of a sentence-transformers folder.

    Args:
        folder: str, a local checkpoint folder.

    Returns:
        None when `folder` has no `modules.json` (not a sentence-transformers
        folder), else a dict with `pooling` (str or None when the stack has no
        Pooling module), `max_length` (int or None: `max_seq_length` of
        `sentence_bert_config.json`, else, as sentence-transformers 6 reads
        it, `model_max_length` of the tokenizer's `tokenizer_config.json`),
        `do_lower_case` (bool or None), `normalize` (bool, whether the
        stack ends in Normalize) and `transformer_dir` (the folder of the
        Transformer module's Hugging Face files: `folder` itself, or a
        subfolder such as `0_Transformer` in older sentence-transformers
        layouts; None without a Transformer module).

    Raises:
        ValueError: for a module type other than Transformer, Pooling,
            Normalize (naming the module, its path and type), a module out of
            that order, or an unsupported pooling configuration.

    Warns (`UserWarning`) when `config_sentence_transformers.json` names a
    default prompt (`default_prompt_name`), which sentence-transformers
    prepends to every text it encodes and keras-cosent does not.

    Example:

    >>> import keras_cosent
    >>> from keras_cosent.models.sentence_transformers_config import (
    ...     read_sentence_transformers_config)
    >>> config = read_sentence_transformers_config(
    ...     keras_cosent.models.default_checkpoint())
    >>> config["pooling"], config["max_length"]
    ('mean', 256)
    """
    folder = str(folder)
    modules_path = os.path.join(folder, "modules.json")
    if not os.path.isdir(folder) or not os.path.isfile(modules_path):
        return None
    modules = load_json_file(modules_path, list)
    order = {"Transformer": 0, "Pooling": 1, "Normalize": 2}
    result = {"pooling": None, "max_length": None, "do_lower_case": None, "normalize": False,
              "transformer_dir": None}
    last = -1
    for module in sorted(modules, key=lambda m: int(m.get("idx", 0))):
        kind = _short_type(module.get("type", ""))
        where = f"module {module.get('name', module.get('idx'))!r} (path {module.get('path')!r}, " \
                f"type {module.get('type')!r})"
        if kind not in order:
            raise ValueError(
                f"{modules_path}: {where} is not supported; keras-cosent reads "
                "Transformer, Pooling and Normalize modules only"
            )
        if order[kind] <= last:
            raise ValueError(f"{modules_path}: {where} is out of order; expected "
                             "Transformer, then Pooling, then Normalize")
        last = order[kind]
        module_dir = os.path.join(folder, module.get("path", ""))
        if kind == "Transformer":
            result["transformer_dir"] = os.path.normpath(module_dir)
            bert_config = os.path.join(module_dir, "sentence_bert_config.json")
            if os.path.isfile(bert_config):
                config = load_json_file(bert_config)
                value = config.get("max_seq_length")
                if value is not None:
                    if (isinstance(value, bool) or not isinstance(value, (int, float))
                            or not math.isfinite(value) or value != int(value) or value < 1):
                        raise ValueError(f"{bert_config}: max_seq_length {value!r} should be "
                                         "a positive integer")
                    result["max_length"] = int(value)
                if config.get("do_lower_case") is not None:
                    result["do_lower_case"] = bool(config["do_lower_case"])
            if result["max_length"] is None:
                # sentence-transformers 6 keeps the limit on the tokenizer only.
                result["max_length"] = _tokenizer_max_length(module_dir)
        elif kind == "Pooling":
            pooling_path = os.path.join(module_dir, "config.json")
            if not os.path.isfile(pooling_path):
                raise ValueError(f"{modules_path}: {where} has no {pooling_path}")
            result["pooling"] = pooling_from_config(load_json_file(pooling_path), pooling_path)
        else:
            result["normalize"] = True
    _warn_of_default_prompt(folder)
    return result


def _warn_of_default_prompt(folder):
    """Warns when `config_sentence_transformers.json` names a default prompt:
    sentence-transformers prepends it to every text it encodes, and keras-cosent
    encodes the texts as given (their embeddings differ, cosine 0.86-0.97)."""
    path = os.path.join(folder, "config_sentence_transformers.json")
    if not os.path.isfile(path):
        return
    config = load_json_file(path)
    name = config.get("default_prompt_name")
    prompts = config.get("prompts")
    prompt = prompts.get(name) if isinstance(name, str) and isinstance(prompts, dict) else None
    if isinstance(prompt, str) and prompt:
        warnings.warn(
            f"{path}: default_prompt_name {name!r}: sentence-transformers prepends "
            f"{prompt!r} to every text it encodes, and keras-cosent encodes texts as given; "
            "prepend it to your texts for the same embeddings", stacklevel=3)


def check_max_length(max_length, hf_config, source):
    """Raises ValueError if `max_length` exceeds the backbone's position table."""
    if not hf_config or max_length is None:
        return
    limit = hf_config.get("max_position_embeddings")
    if limit is not None and int(max_length) > int(limit):
        raise ValueError(
            f"{source}: max_length {max_length} exceeds the backbone's "
            f"max_position_embeddings {limit}; expected at most {limit}"
        )
