"""The wgrt Python package against a libwgrt.so ($WGRT_LIBRARY; tools/test.sh points it at
build/libwgrt.so) and wgrt's demo model, found beside the library. Generations are a few tokens:
the CI's GPU is a CPU driver."""
import os
import pathlib
import re
import subprocess
import sys
import threading

import pytest

import wgrt

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = ("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant:{% endif %}")
GREEDY = dict(temperature=0, max_tokens=6)


@pytest.fixture(scope="module")
def model():
    with wgrt.Model(chat_template=TEMPLATE) as m:  # the demo model, with a template of ours
        yield m


def test_version_is_the_projects():
    project = re.search(r"project\(wgrt VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert wgrt.version() == project
    assert wgrt.__version__ == project


def test_sampling_defaults_come_from_the_library():
    d = wgrt.sampling_defaults()
    assert d["max_tokens"] == 128 and d["top_k"] == 40 and abs(d["temperature"] - 0.8) < 1e-6


def test_tokenize_and_detokenize_round_trip(model):
    text = "In the beginning God created the heaven and the earth."
    ids = model.tokenize(text, add_special=False)
    assert 5 < len(ids) < len(text)
    assert model.tokenize(text)[1:] == ids  # the demo model prepends BOS
    assert model.detokenize(ids) == text
    long_text = "and " * 300  # more tokens than the first buffer's guess? grown as needed
    assert model.detokenize(model.tokenize(long_text, add_special=False)) == long_text


def test_generate_and_stream_give_the_same_greedy_text(model):
    text = model.generate("Once upon a time", **GREEDY)
    assert text.strip()
    pieces = list(model.stream("Once upon a time", **GREEDY))
    assert 1 <= len(pieces) <= 6
    assert "".join(pieces) == text
    assert len(model.tokenize(text, add_special=False)) <= 6


def test_stop_texts_bias_penalties_and_stats(model):
    text = model.generate("Once upon a time", temperature=0, max_tokens=10)
    st = model.last_stats()
    assert st["stop_reason"] == "length" and st["n_generated"] == 10
    assert st["n_prompt"] == len(model.tokenize("Once upon a time"))
    cut = text[len(text) // 2:len(text) // 2 + 3]
    stopped = model.generate("Once upon a time", temperature=0, max_tokens=10, stop=["never there", cut])
    assert stopped == text[:text.find(cut)]
    assert model.last_stats()["stop_reason"] == "stop"
    # The greedy reply's first token banned: another reply; penalties are taken.
    first = model.tokenize(text, add_special=False)[0]
    other = model.generate("Once upon a time", temperature=0, max_tokens=10, logit_bias={first: -100},
                           presence_penalty=0.5, frequency_penalty=0.5)
    assert model.tokenize(other, add_special=False)[0] != first


def test_json_schema_and_grammar_hold_the_reply(model):
    import json
    for rule in (dict(json_schema={"enum": ["yes", "no"]}), dict(grammar='root ::= "\\"" ("yes" | "no") "\\""')):
        reply = model.generate("Is the sea blue?", temperature=1, seed=5, max_tokens=16, **rule)
        assert json.loads(reply) in ("yes", "no"), reply
        assert model.last_stats()["stop_reason"] == "eos"
    with pytest.raises(wgrt.WgrtError, match="json_schema: not valid JSON"):
        model.generate("x", json_schema="{nope")
    with pytest.raises(wgrt.WgrtError, match="appears twice|token"):
        model.generate("x", logit_bias={10**7: 1.0})


def test_closing_a_stream_stops_its_generation(model):
    s = model.stream("And God said", temperature=0, max_tokens=-1)
    first = next(s)
    assert first
    s.close()  # the C callback stops it: the model is free at once
    assert model.generate("And God said", temperature=0, max_tokens=2)


def test_chat_renders_the_template_and_streams(model):
    messages = [{"role": "user", "content": "Who made the light?"}]
    reply = model.chat(messages, **GREEDY)
    assert reply
    assert "".join(model.chat([("user", "Who made the light?")], stream=True, **GREEDY)) == reply
    # The template's text is the prompt: the reply is generate()'s on the rendered conversation.
    assert reply == model.generate("user: Who made the light?\nassistant:", **GREEDY)


def test_cancel_before_a_generation_stops_it_at_its_start(model):
    model.cancel()
    assert model.generate("Once upon a time", **GREEDY) == ""
    assert model.generate("Once upon a time", **GREEDY)  # the cancel was used up


def test_a_second_generation_meanwhile_is_busy(model):
    s = model.stream("And the earth", temperature=0, max_tokens=-1)
    next(s)
    with pytest.raises(wgrt.WgrtError) as e:
        model.generate("x", max_tokens=1)
    assert e.value.status_name == "WGRT_ERR_BUSY"
    s.close()


def test_errors_carry_the_status_and_message(tmp_path):
    missing = tmp_path / "no-such.gguf"
    with pytest.raises(wgrt.WgrtError) as e:
        wgrt.Model(str(missing))
    assert e.value.status == -2 and e.value.status_name == "WGRT_ERR_IO"
    assert str(missing) in e.value.message and "hint" in e.value.message
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    with pytest.raises(wgrt.WgrtError) as e:
        wgrt.Model(str(bad))
    assert e.value.status_name == "WGRT_ERR_MODEL" and str(bad) in e.value.message


def test_bad_arguments(model):
    with pytest.raises(TypeError, match="unknown sampling option 'temp'"):
        model.generate("x", temp=0)
    with pytest.raises(wgrt.WgrtError) as e:
        model.detokenize([10 ** 9])
    assert e.value.status_name == "WGRT_ERR_INVALID_ARGUMENT" and "tokens[0]" in e.value.message
    with pytest.raises(wgrt.WgrtError) as e:
        model.chat([])
    assert e.value.status_name == "WGRT_ERR_INVALID_ARGUMENT"


def test_a_model_without_a_chat_template_says_so():
    with wgrt.Model() as m, pytest.raises(wgrt.WgrtError) as e:
        m.chat([{"role": "user", "content": "hi"}], max_tokens=1)
    assert e.value.status_name == "WGRT_ERR_MODEL" and "chat_template" in e.value.message


def test_a_closed_model_refuses_calls():
    m = wgrt.Model()
    m.close()
    m.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        m.generate("x")


def test_generation_from_another_thread(model):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("text", model.generate("Once upon a time", **GREEDY)))
    t.start()
    t.join()
    assert out["text"] == model.generate("Once upon a time", **GREEDY)


def test_a_missing_library_names_what_was_tried(tmp_path):
    env = dict(os.environ, WGRT_LIBRARY=str(tmp_path / "libwgrt.so"))
    r = subprocess.run([sys.executable, "-c", "import wgrt; wgrt.version()"], env=env, capture_output=True,
                       text=True, cwd=ROOT / "python")
    assert r.returncode != 0
    assert f"{tmp_path / 'libwgrt.so'} (no such file)" in r.stderr and "WGRT_LIBRARY" in r.stderr


def test_embed_gives_a_unit_vector_of_the_models_width(model):
    a = model.embed("In the beginning God created the heaven and the earth.")
    b = model.embed("Call me Ishmael.")
    assert len(a) == model.n_embd == len(b) and model.n_embd > 0
    assert abs(sum(v * v for v in a) - 1.0) < 1e-4
    assert model.embed("In the beginning God created the heaven and the earth.") == a  # the same text, the same vector
    assert sum(x * y for x, y in zip(a, b)) < 0.9999  # another text, another direction


def test_q8_0_kv_caches():
    # Both caches q8_0 (-ctk/-ctv q8_0): the demo model still writes text; a bad name lists the choices.
    with wgrt.Model(cache_type_k="q8_0", cache_type_v="q8_0") as m:
        assert m.generate("Once upon a time", **GREEDY)
    with pytest.raises(wgrt.WgrtError) as e:
        wgrt.Model(cache_type_k="q9")
    assert e.value.status_name == "WGRT_ERR_INVALID_ARGUMENT" and "f32, f16, q8_0" in e.value.message
