"""wgrt from Python: ctypes over wgrt's C API (libwgrt.so, include/wgrt/wgrt.h); nothing to
compile. docs/API.md ("Python") has the whole of it.

    import wgrt
    m = wgrt.Model()                      # wgrt's demo model; Model("model.gguf") for another
    print(m.generate("Once upon a time", max_tokens=16, temperature=0))
    for text in m.stream("In the beginning", max_tokens=16):
        print(text, end="", flush=True)
"""
import ctypes
import json
import queue
import threading

from . import _lib

__version__ = "0.2.0"  # the library's wgrt_version(), checked by the tests
__all__ = ["Model", "WgrtError", "version", "sampling_defaults"]

_loaded = None
_load_lock = threading.Lock()


def _c():
    """libwgrt.so, loaded at first use ($WGRT_LIBRARY, beside the package, the prefix, ld.so)."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = _lib.load()
        return _loaded


def version():
    """The library's "MAJOR.MINOR.PATCH"."""
    return _c().wgrt_version().decode()


# The C struct's fields that are not options: its version, and the counts of the lists.
_NOT_OPTIONS = ("struct_size", "n_logit_bias", "n_stop")


def sampling_defaults():
    """The C API's sampling defaults (wgrt_sampling_default_params) as a dict: the plain
    options' values; stop, logit_bias, grammar and json_schema are None (off)."""
    sp = _c().wgrt_sampling_default_params()
    out = {}
    for name, kind in _lib.SamplingParams._fields_:
        if name in _NOT_OPTIONS:
            continue
        out[name] = None if name in ("stop", "logit_bias", "grammar", "json_schema") else getattr(sp, name)
    return out


class WgrtError(Exception):
    """A failed C API call: .status (the wgrt_status, negative), .status_name ("WGRT_ERR_IO")
    and .message (wgrt_last_error(): what failed, where, and a hint)."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = _c().wgrt_status_name(status).decode()
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


def _last_error(status=None):
    """This thread's latest failure as a WgrtError (the C API keeps it per thread)."""
    c = _c()
    return WgrtError(c.wgrt_last_status() if status is None else status,
                     c.wgrt_last_error().decode("utf-8", errors="replace"))


def _check(result):
    if result < 0:
        raise _last_error(result)
    return result


class _Sampling:
    """wgrt_sampling_params with the memory its pointers reach (alive as long as this is)."""

    def __init__(self, options):
        sp = _c().wgrt_sampling_default_params()
        self.keep = []
        known = [name for name, _ in _lib.SamplingParams._fields_ if name not in _NOT_OPTIONS]
        for key, value in options.items():
            if key not in known:
                raise TypeError(f"unknown sampling option {key!r} (options: {', '.join(known)})")
            if key == "max_tokens" and value is None:
                value = -1  # None: until end of text
            elif key == "stop":
                texts = [value] if isinstance(value, str) else list(value or [])
                if not all(isinstance(t, str) for t in texts):
                    raise TypeError("stop: a str or a list of str")
                array = (ctypes.c_char_p * len(texts))(*[t.encode() for t in texts])
                self.keep.append(array)
                sp.stop, sp.n_stop = array, len(texts)
                continue
            elif key == "logit_bias":
                pairs = [(int(t), float(b)) for t, b in (value or {}).items()]
                array = (_lib.LogitBias * len(pairs))(*[_lib.LogitBias(t, b) for t, b in pairs])
                self.keep.append(array)
                sp.logit_bias, sp.n_logit_bias = array, len(pairs)
                continue
            elif key in ("grammar", "json_schema") and value is not None:
                if key == "json_schema" and not isinstance(value, str):
                    value = json.dumps(value)  # a dict: its JSON text
                value = value.encode()
                self.keep.append(value)
            setattr(sp, key, value)
        self.params = sp


def _chat_messages(messages):
    """[{"role": ..., "content": ...}] or [(role, content)] as a C array (and the bytes it points at)."""
    pairs = []
    for i, m in enumerate(messages):
        role, content = (m["role"], m["content"]) if isinstance(m, dict) else m
        if not isinstance(role, str) or not isinstance(content, str):
            raise TypeError(f"messages[{i}]: role and content must be str")
        pairs.append((role.encode(), content.encode()))
    array = (_lib.ChatMessage * len(pairs))(*[_lib.ChatMessage(r, t) for r, t in pairs])
    return array, pairs


class Model:
    """A model on its own GPU device. path: a .gguf file or a Hugging Face folder; None: wgrt's
    demo model. n_ctx: context positions (0: the model's). adapter_index: -1 for the best GPU.
    chat_template: Jinja text that replaces the model's own. cache_type_k, cache_type_v: the KV
    cache's types, "f16" (None), "q8_0" or "f32". Raises WgrtError."""

    def __init__(self, path=None, *, n_ctx=0, adapter_index=-1, chat_template=None, cache_type_k=None,
                 cache_type_v=None):
        c = _c()
        p = c.wgrt_model_default_params()
        self._keep = [s.encode() if s is not None else None
                      for s in (path, chat_template, cache_type_k, cache_type_v)]
        p.model_path, p.chat_template, p.cache_type_k, p.cache_type_v = self._keep
        p.n_ctx = n_ctx
        p.adapter_index = adapter_index
        self._m = c.wgrt_model_load(ctypes.byref(p))
        if not self._m:
            raise _last_error()
        self._streams = set()

    def close(self):
        """Frees the model (a running stream is cancelled first); later calls raise ValueError."""
        if getattr(self, "_m", None) and _loaded is not None:
            for t in list(self._streams):
                _c().wgrt_cancel(self._m)
                t.join()
            _c().wgrt_model_free(self._m)
            self._m = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not self._m:
            raise ValueError("wgrt.Model: the model is closed")
        return self._m

    def tokenize(self, text, *, add_special=True, parse_special=True):
        """The text's token ids (BOS as the model wants with add_special)."""
        m, b = self._handle(), text.encode()
        capacity = len(b) + 2
        while True:
            ids = (ctypes.c_int32 * capacity)()
            n = _check(_c().wgrt_tokenize(m, b, len(b), int(add_special), int(parse_special), ids, capacity))
            if n <= capacity:
                return list(ids[:n])
            capacity = n

    def detokenize(self, tokens, *, render_special=False):
        """The tokens' text (invalid UTF-8 as U+FFFD)."""
        m = self._handle()
        ids = (ctypes.c_int32 * len(tokens))(*tokens)
        n = _check(_c().wgrt_detokenize(m, ids, len(tokens), int(render_special), None, 0))
        buf = ctypes.create_string_buffer(n + 1)
        _check(_c().wgrt_detokenize(m, ids, len(tokens), int(render_special), buf, n + 1))
        return buf.raw[:n].decode("utf-8", errors="replace")

    @property
    def n_embd(self):
        """The width of the model's embeddings (its hidden size)."""
        return _check(_c().wgrt_model_n_embd(self._handle()))

    def embed(self, text):
        """The text's embedding as a list of n_embd floats: the final normed hidden states of its
        tokens pooled as the model file says (mean when it says nothing), L2-normalized."""
        m, b = self._handle(), text.encode()
        n = self.n_embd
        out = (ctypes.c_float * n)()
        got = _check(_c().wgrt_embed(m, b, len(b), out, n))
        return list(out[:got])

    def cancel(self):
        """Stops the running generation before its next token (from any thread); one started
        later is stopped at its start if none runs."""
        _c().wgrt_cancel(self._handle())

    # Sampling options (keyword arguments), defaults from the C API (sampling_defaults()):
    # temperature (0: greedy), top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed,
    # max_tokens (None or < 0: until end of text or the context is full), presence_penalty,
    # frequency_penalty, logit_bias ({token id: bias}), stop (a str or a list of str),
    # grammar (GBNF text), json_schema (a dict or its JSON text).

    def last_stats(self):
        """The latest finished generation's figures: stop_reason ("eos", "length", "stop",
        "context", "callback", "cancelled"; None before any), n_prompt, n_generated,
        prompt_seconds, generate_seconds."""
        st = _lib.GenerateStats()
        st.struct_size = ctypes.sizeof(_lib.GenerateStats)
        _check(_c().wgrt_last_generate_stats(self._handle(), ctypes.byref(st)))
        out = {name: getattr(st, name) for name, _ in _lib.GenerateStats._fields_ if name != "struct_size"}
        out["stop_reason"] = _lib.STOP_REASONS.get(st.stop_reason, st.stop_reason)
        return out

    def generate(self, prompt, **sampling):
        """The text generated after `prompt` (a fresh context each call)."""
        return self._collect(lambda cb, sp: _c().wgrt_generate(self._handle(), prompt.encode(), sp, cb, None),
                             sampling)

    def stream(self, prompt, **sampling):
        """generate() as it happens: yields each token's text (a character split across
        tokens comes whole, with the later one). Closing the generator stops the generation."""
        return self._stream(lambda cb, sp: _c().wgrt_generate(self._handle(), prompt.encode(), sp, cb, None),
                            sampling)

    def chat(self, messages, *, stream=False, **sampling):
        """The assistant's reply to `messages` ([{"role": "user", "content": "..."}, ...]),
        rendered with the model's chat template; with stream=True a generator as stream()."""
        array, _pairs = _chat_messages(messages)

        def start(cb, sp):
            return _c().wgrt_chat(self._handle(), array, len(_pairs), sp, cb, None)

        return self._stream(start, sampling) if stream else self._collect(start, sampling)

    def _collect(self, start, sampling):
        sp = _Sampling(sampling)
        pieces, raised = [], []

        def on_token(text, n, token, user):
            try:
                pieces.append(ctypes.string_at(text, n))
                return 0
            except BaseException as e:  # KeyboardInterrupt lands here: stop, raise it after
                raised.append(e)
                return 1

        status = start(_lib.TokenCallback(on_token), ctypes.byref(sp.params))
        if raised:
            raise raised[0]
        _check(status)
        return b"".join(pieces).decode("utf-8", errors="replace")

    def _stream(self, start, sampling):
        sp = _Sampling(sampling)  # bad options raise here, at the call, not at the first next()
        self._handle()
        return self._stream_run(start, sp)

    def _stream_run(self, start, sp):
        # wgrt_generate blocks and calls back per token: it runs on a thread that hands the
        # texts over through a queue; the generator's close (or garbage collection) stops it.
        texts, stop, end = queue.Queue(), threading.Event(), object()

        def on_token(text, n, token, user):
            if stop.is_set():
                return 1
            texts.put(ctypes.string_at(text, n))
            return 0

        callback = _lib.TokenCallback(on_token)

        def work():
            error = None
            try:
                status = start(callback, ctypes.byref(sp.params))
                if status < 0:
                    error = _last_error(status)  # this thread's
            except BaseException as e:
                error = e
            texts.put((end, error))

        worker = threading.Thread(target=work, name="wgrt-generate", daemon=True)
        self._streams.add(worker)
        worker.start()
        try:
            while True:
                item = texts.get()
                if isinstance(item, tuple) and item[0] is end:
                    if item[1] is not None:
                        raise item[1]
                    return
                if item:
                    yield item.decode("utf-8", errors="replace")
        finally:
            stop.set()
            worker.join()
            self._streams.discard(worker)
