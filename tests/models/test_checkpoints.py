"""Reading checkpoint folders that keras-hub cannot read as they are: a vocabulary from tokenizer.json."""

import json

import pytest

from keras_cosent.models.checkpoints import vocabulary_from_tokenizer_json


def test_vocabulary_equals_the_vocab_txt_beside_it(minilm_path):
    # The packaged folder carries both files: vocab.txt is the reference.
    expected = (minilm_path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert vocabulary_from_tokenizer_json(str(minilm_path / "tokenizer.json")) == expected
    assert len(expected) == 30522


def _wordpiece(vocab, added=()):
    return {"model": {"type": "WordPiece", "vocab": vocab},
            "added_tokens": [{"id": i, "content": c} for i, c in added]}


@pytest.mark.parametrize(
    "data,match",
    [
        ({"model": {"type": "BPE", "vocab": {"a": 0}}}, "tokenizer model 'BPE' is not supported"),
        (_wordpiece({"[PAD]": 0, "a": 2}), r"token 'a' has id 2; expected the 2 ids 0..1"),
        (_wordpiece({"[PAD]": 0, "a": 0}), "has id 0; expected the 2 ids 0..1, each once"),
        (_wordpiece({"[PAD]": 0, "a\nb": 1}), "holds a line break"),
        (_wordpiece({"[PAD]": 0, "a": 1}, added=[(2, "<new>")]),
         r"added token '<new>' \(id 2\) is not in the WordPiece vocabulary"),
    ],
)
def test_unreadable_vocabularies_refused_naming_the_file(tmp_path, data, match):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=match) as info:
        vocabulary_from_tokenizer_json(str(path))
    assert str(path) in str(info.value)


def test_added_tokens_inside_the_vocabulary_are_read(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_wordpiece({"[PAD]": 0, "a": 1}, added=[(0, "[PAD]")])))
    assert vocabulary_from_tokenizer_json(str(path)) == ["[PAD]", "a"]
