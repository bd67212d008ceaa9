"""A keras-hub `BertTokenizer` that normalises text as Hugging Face's BERT tokenizer does.

keras-hub lowercases with TensorFlow Text's `case_fold_utf8`, which is NFKC
case folding: it also rewrites compatibility characters, so the full-width
comma "，" becomes "," and "ｆｕｌｌ" becomes "full", and it turns non-breaking
and ideographic spaces into spaces. Hugging Face's `BertTokenizer` (the Rust
`BertNormalizer`, which sentence-transformers uses) instead

1. drops control and format characters (`\\x00`, U+FFFD, categories Cc except
   tab/newline/return, Cf, Co, Cs), so "a\\u200bb" reads "ab", whether or not
   it lowercases,
2. turns every other whitespace character into a space,
3. when lowercasing, strips accents (NFD, then drops nonspacing marks) and
   lowercases each character on its own: no NFKC, and "Σ" is always "σ",
   never the final "ς".

A checkpoint trained with Hugging Face's tokenizer sees different ids under
keras-hub's on any text with compatibility characters: 48 of the 800 Chinese
STS-B test sentences (full-width punctuation). `HFBertTokenizer` does steps 1-3
itself (in TensorFlow ops inside a graph, so exported SavedModels agree, and in
Python otherwise) and hands keras-hub the rest (CJK and punctuation splitting,
accent stripping, WordPiece) with keras-hub's own lowercasing off.

Known remaining differences, all in keras-hub's part: special tokens typed in
the text ("[MASK]") are split like any text, where Hugging Face keeps them
whole; a word longer than 100 *bytes* (keras-hub) rather than 100 characters
(Hugging Face) becomes `[UNK]` (long Korean words, decomposed to jamo by the
accent stripping, hit this); and the two sides' Unicode tables differ in
version for recently added characters.
"""

import unicodedata

import keras_hub
import numpy as np

from keras_cosent.api_export import keras_cosent_export

# Removed before tokenising, as Hugging Face's `_clean_text` does: NUL, U+FFFD,
# control characters other than tab / newline / return, format characters
# (zero-width space, soft hyphen, ...), private use characters and surrogates.
# Unassigned code points (newer emoji in older Unicode tables) are kept.
_DROPPED_CATEGORIES = ("Cc", "Cf", "Co", "Cs")
_DROPPED_TF = r"[\x{0}-\x{8}\x{B}\x{C}\x{E}-\x{1F}\x{7F}-\x{9F}\p{Cf}\p{Co}\x{FFFD}]"


def _normalize_char(c, lowercase):
    if c in "\t\n\r":
        return " "
    if c == "\ufffd" or unicodedata.category(c) in _DROPPED_CATEGORIES:
        return ""
    if c.isspace():
        return " "
    return c.lower() if lowercase else c


def normalize_python(text, lowercase=True):
    """Steps 1-3 of the module docstring (without accents) on one Python str."""
    return "".join(_normalize_char(c, lowercase) for c in text)


def normalize_tf(text, lowercase=True):
    """Steps 1-3 of the module docstring (without accents) on a string `tf.Tensor`."""
    import tensorflow as tf

    text = tf.strings.regex_replace(text, _DROPPED_TF, "")
    text = tf.strings.regex_replace(text, r"[\s\p{Z}]", " ")
    if not lowercase:
        return text
    # Lowercase character by character: `tf.strings.lower` on whole strings
    # would apply the final-sigma rule that Hugging Face does not.
    chars = tf.strings.unicode_split(text, "UTF-8")
    chars = tf.ragged.map_flat_values(tf.strings.lower, chars, encoding="utf-8")
    return tf.strings.reduce_join(chars, axis=-1)


def _normalize_any(inputs, lowercase):
    """Normalises str, bytes, (nested) lists/tuples, numpy arrays or TF tensors."""
    if isinstance(inputs, str):
        return normalize_python(inputs, lowercase)
    if isinstance(inputs, bytes):
        return normalize_python(inputs.decode("utf-8"), lowercase)
    if isinstance(inputs, (list, tuple)):
        return [_normalize_any(x, lowercase) for x in inputs]
    if isinstance(inputs, np.ndarray):
        return _normalize_any(inputs.tolist(), lowercase)
    import tensorflow as tf

    if isinstance(inputs, tf.RaggedTensor):
        return tf.ragged.map_flat_values(normalize_tf, inputs, lowercase)
    return normalize_tf(tf.convert_to_tensor(inputs), lowercase)


@keras_cosent_export
class HFBertTokenizer(keras_hub.models.BertTokenizer):
    """keras-hub's `BertTokenizer`, lowercasing as Hugging Face's `BertTokenizer` does.

    Text is cleaned as in `transformers` (control and format characters
    dropped, every whitespace character made a space) and, with
    `lowercase=True`, lowercased character by character without NFKC;
    keras-hub's own NFKC case folding is never used.
    `SentenceEncoder.from_checkpoint` uses it for BERT checkpoints in Hugging
    Face format. The class is registered for `.keras` loading when this
    module is imported (`SentenceEncoder` does so itself).

    Args:
        vocabulary: list of str or a path to a vocabulary file (one token per
            line), as for `keras_hub.models.BertTokenizer`.
        lowercase: bool. Lowercase like Hugging Face.
        strip_accents: bool, or None (the default) to strip accents exactly
            when lowercasing, as Hugging Face does.
        **kwargs: other `keras_hub.models.BertTokenizer` arguments
            (`split_on_cjk`, ...; `special_tokens_in_strings` only without
            `lowercase`, which would split the special tokens). Leave
            `sequence_length` unset for a `SentenceEncoder`: its preprocessor
            truncates and pads itself.

    Example:

    >>> from keras_cosent.models import HFBertTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", ",", "，"]
    >>> tokenizer = HFBertTokenizer(vocabulary=vocab, lowercase=True)
    >>> [int(i) for i in tokenizer(["A，B"])[0]]  # keras-hub alone gives [5, 7, 6]
    [5, 8, 6]
    >>> [int(i) for i in tokenizer(["a\\u200bb"])[0]]  # zero-width space dropped
    [1]
    """

    def __init__(self, vocabulary=None, lowercase=False, strip_accents=None, **kwargs):
        if lowercase and kwargs.get("special_tokens_in_strings"):
            # This class lowercases before keras-hub sees the text, so "[MASK]" would
            # reach keras-hub's case-sensitive special-token match as "[mask]", split.
            raise ValueError(
                "`special_tokens_in_strings=True` is not supported with `lowercase=True`: "
                "the text is lowercased before keras-hub looks for special tokens, so "
                "they would be split like any text. Received: `lowercase`=True, "
                "`special_tokens_in_strings`=True"
            )
        if strip_accents is None:
            strip_accents = bool(lowercase)
        super().__init__(
            vocabulary=vocabulary, lowercase=False, strip_accents=strip_accents, **kwargs
        )
        self.hf_lowercase = bool(lowercase)

    def tokenize(self, inputs):
        return super().tokenize(_normalize_any(inputs, self.hf_lowercase))

    def get_config(self):
        config = super().get_config()
        config["lowercase"] = self.hf_lowercase
        return config
