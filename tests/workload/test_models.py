"""Model configs (config.json): the fields memsim uses are checked, errors name file and field."""
from __future__ import annotations

import json

import pytest

from memsim.core.errors import ConfigError
from memsim.workload import load_model, model_config, models

BASE = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 512}


@pytest.mark.parametrize("name", models())
def test_shipped_models_load(name):
    assert model_config(name).layers >= 1


@pytest.mark.parametrize(("changes", "field", "needle"), [
    ({"hidden_size": True}, "hidden_size", "positive integer"),
    ({"hidden_size": "64"}, "hidden_size", "positive integer"),
    ({"hidden_size": 64.0}, "hidden_size", "positive integer"),
    ({"num_hidden_layers": 0}, "num_hidden_layers", "positive integer"),
    ({"vocab_size": -1}, "vocab_size", "positive integer"),
    ({"vocab_size": 10**40}, "vocab_size", "up to 2147483647"),
    ({"model_type": ["llama"]}, "model_type", "unsupported model_type"),
    ({"model_type": "t5"}, "model_type", "unsupported model_type"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings", "true or false"),
    ({"num_key_value_heads": 3}, "num_key_value_heads", "not divisible"),
    ({"num_local_experts": 2, "num_experts_per_tok": 4}, "num_experts_per_tok", "experts per token"),
])
def test_bad_model_fields_name_file_and_field(tmp_path, changes, field, needle):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({**BASE, **changes}))
    with pytest.raises(ConfigError) as info:
        load_model(path)
    assert info.value.file == str(path) and info.value.field == field and needle in info.value.message


@pytest.mark.parametrize(("text", "needle"), [
    ('{"model_type": "llama", "model_type": "gpt2"}', "duplicate key"),
    ('{"hidden_size": NaN}', "NaN"),
    ("[1, 2]", "expected a JSON object"),
])
def test_unreadable_model_files_are_one_line(tmp_path, text, needle):
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle) as info:
        load_model(path)
    assert info.value.file == str(path)


def test_a_folder_given_as_a_model_says_so(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        model_config(str(tmp_path))
