"""`HFBertTokenizer` against Hugging Face's tokenizer of the packaged all-MiniLM-L6-v2.

The reference is `transformers.AutoTokenizer` on the same folder (what
sentence-transformers runs). keras-hub's own `BertTokenizer` is checked to
differ on the same strings, so the parity tests can fail.
"""

import doctest

import keras
import numpy as np
import pytest

from keras_cosent.models import SentenceEncoder
from keras_cosent.models import hf_bert_tokenizer
from keras_cosent.models.hf_bert_tokenizer import HFBertTokenizer
from tests.backends import once_in

# Each line exercises one way keras-hub's NFKC case folding and Hugging Face differ,
# plus ordinary text that must stay the same.
TRICKY = [
    "今天天气很好，我们去公园吧！",  # full-width comma and exclamation mark
    "（括号）：冒号；分号？",  # full-width brackets, colon, semicolon, question mark
    "ＦＵＬＬ ｗｉｄｔｈ ＡＢＣ １２３",  # full-width letters and digits
    "ﬁne ligatures, x² and ½",  # compatibility ligature, superscript, fraction
    "zero\u200bwidth and soft\u00adhyphen",  # format characters Hugging Face drops
    "no\u00a0break and ideographic\u3000space",  # non-ASCII whitespace
    "ΟΔΟΣ ΟΔΟΣ.",  # Greek capital sigma at a word end: Hugging Face gives σ, not ς
    "İstanbul, STRASSE, Straße",  # dotted capital I, sharp s
    "Café crème, naïve façade",  # accents stripped after lowercasing
    "private\ue000use and control\x07char",
    "love\U0001fa77 pink",  # an emoji newer than Python 3.11's Unicode table: kept
    "tab\tnew\nline\r\nend",
    "A man is playing a guitar.",
]


@pytest.fixture(scope="module")
def hf_tokenizer(minilm_path):
    import transformers
    return transformers.AutoTokenizer.from_pretrained(str(minilm_path))


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return SentenceEncoder.from_checkpoint(minilm_path, max_length=512)


def _reference_ids(hf_tokenizer, texts):
    return [hf_tokenizer(t)["input_ids"] for t in texts]


def test_from_checkpoint_uses_it_for_the_packaged_model(encoder):
    assert isinstance(encoder.tokenizer, HFBertTokenizer)
    assert encoder.tokenizer.hf_lowercase and encoder.tokenizer.strip_accents


def test_token_ids_match_hugging_face(encoder, hf_tokenizer):
    expected = _reference_ids(hf_tokenizer, TRICKY)
    ours = encoder.tokenize(TRICKY)
    for text, ids, ref in zip(TRICKY, ours, expected):
        assert ids.tolist() == ref, repr(text)


def test_keras_hub_alone_differs_on_the_same_strings(minilm_path, hf_tokenizer):
    # Proves the test above can fail: NFKC case folding maps "，" to "," etc.
    import keras_hub

    plain = keras_hub.models.BertTokenizer(
        vocabulary=str(minilm_path / "vocab.txt"), lowercase=True, strip_accents=True
    )
    expected = _reference_ids(hf_tokenizer, TRICKY)
    differ = [
        text
        for text, ref in zip(TRICKY, expected)
        if [101, *[int(i) for i in plain(text)], 102] != ref
    ]
    assert len(differ) >= 6, differ


@once_in("tensorflow", "the tokenizer runs on TensorFlow on every backend")
def test_graph_path_matches_python_path(encoder):
    # The SavedModel export tokenises inside a tf.function (TensorFlow Text ops).
    import tensorflow as tf

    tokenizer = encoder.tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def in_graph(texts):
        return tokenizer.tokenize(texts)

    graph = in_graph(tf.constant(TRICKY)).to_list()
    eager = [[int(i) for i in ids] for ids in tokenizer(TRICKY)]
    assert graph == eager


def test_chinese_sts_b_test_split_matches_hugging_face(encoder, hf_tokenizer, shared_data):
    # Real text: every sentence of the Chinese STS-B test split (keras-hub alone
    # got 48 of the first 800 wrong, mostly full-width punctuation).
    from keras_cosent.data import read_dataset

    ds = read_dataset(str(shared_data / "sts-b-zh" / "STS-B.test.data"), "pair-tsv")
    texts = list(ds.columns[0]) + list(ds.columns[1])
    expected = [ids[:512] for ids in _reference_ids(hf_tokenizer, texts)]
    ours = [ids.tolist() for ids in encoder.tokenize(texts)]
    mismatched = [t for t, a, b in zip(texts, ours, expected) if a != b]
    assert not mismatched, f"{len(mismatched)} of {len(texts)} differ, e.g. {mismatched[:3]}"


def test_config_round_trip_keeps_hugging_face_lowercasing(encoder):
    tokenizer = encoder.tokenizer
    config = keras.layers.serialize(tokenizer)
    assert config["config"]["lowercase"] is True
    restored = keras.layers.deserialize(config)
    restored.set_vocabulary(tokenizer.get_vocabulary())
    assert isinstance(restored, HFBertTokenizer) and restored.hf_lowercase
    np.testing.assert_array_equal(restored(["ＡＢＣ，ok"])[0], tokenizer(["ＡＢＣ，ok"])[0])


def test_saved_encoder_reloads_with_it(encoder, tmp_path):
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    reloaded = keras.saving.load_model(path)
    assert isinstance(reloaded.tokenizer, HFBertTokenizer)
    assert [ids.tolist() for ids in reloaded.tokenize(TRICKY)] == [
        ids.tolist() for ids in encoder.tokenize(TRICKY)
    ]


def test_cased_checkpoints_are_cleaned_like_hugging_face(tmp_path, minilm_path):
    # A cased BERT folder: no lowercasing, no accent stripping, but Hugging Face
    # still cleans the text (keras-hub alone leaves "no\xa0break" one [UNK] word).
    import transformers
    vocab = (minilm_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab += ["No", "Break", "Café", "Ｆｕｌｌ"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(
        '{"do_lower_case": false, "tokenizer_class": "BertTokenizer"}', encoding="utf-8"
    )
    hf = transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=False)
    ours = HFBertTokenizer(vocabulary=str(tmp_path / "vocab.txt"), lowercase=False)
    assert not ours.strip_accents
    texts = ["No\xa0Break", "Café a\u200bb", "Ｆｕｌｌ，", *TRICKY]
    for text in texts:
        assert [101, *[int(i) for i in ours(text)], 102] == hf(text)["input_ids"], repr(text)


def test_strip_accents_follows_lowercase_by_default(minilm_path):
    vocab = str(minilm_path / "vocab.txt")
    assert HFBertTokenizer(vocabulary=vocab, lowercase=True).strip_accents is True
    assert HFBertTokenizer(vocabulary=vocab, lowercase=False).strip_accents is False
    kept = HFBertTokenizer(vocabulary=vocab, lowercase=True, strip_accents=False)
    assert kept.strip_accents is False


def test_special_tokens_in_strings_is_refused_where_lowercasing_would_split_them():
    # The text is lowercased before keras-hub's case-sensitive special-token match:
    # "[MASK] a" gave [, mask, ], a where keras-hub alone and Hugging Face keep [MASK].
    import keras_hub

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "[", "]", "mask"]
    with pytest.raises(ValueError, match=r"`special_tokens_in_strings=True` is not supported "
                                         r"with `lowercase=True`"):
        HFBertTokenizer(vocabulary=vocab, lowercase=True, special_tokens_in_strings=True)
    # Without lowercasing nothing touches the special tokens: kept whole, as keras-hub does.
    cased = HFBertTokenizer(vocabulary=vocab, special_tokens_in_strings=True)
    reference = keras_hub.models.BertTokenizer(vocabulary=vocab, special_tokens_in_strings=True)
    assert [int(i) for i in cased(["[MASK] a"])[0]] == [4, 5]
    assert [int(i) for i in reference(["[MASK] a"])[0]] == [4, 5]


def test_docstring_example():
    result = doctest.testmod(hf_bert_tokenizer, verbose=False)
    assert result.attempted > 0 and result.failed == 0
