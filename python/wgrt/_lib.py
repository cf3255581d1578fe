"""libwgrt.so through ctypes: where it is found, and the C API's declarations (wgrt.h)."""
import ctypes
import os
import pathlib

# The file name the library is installed under (its soname, libwgrt.so.MAJOR.MINOR while the
# major version is 0).
SONAME = "libwgrt.so.0.2"


def candidates():
    """The files tried, in order: $WGRT_LIBRARY; a libwgrt.so beside this package (a copy
    shipped with it); the prefix this package is installed in (PREFIX/lib/python3/
    dist-packages/wgrt -> PREFIX/lib); then the system's search path (ld.so: /usr/lib,
    LD_LIBRARY_PATH)."""
    env = os.environ.get("WGRT_LIBRARY")
    if env:
        return [env]  # named explicitly: nothing else is tried
    here = pathlib.Path(__file__).resolve().parent
    out = [str(here / SONAME)]
    for parent in here.parents:
        if parent.name == "lib":  # PREFIX/lib/python3*/{dist,site}-packages/wgrt
            out.append(str(parent / SONAME))
            break
    out.append(SONAME)
    return out


def load():
    tried = []
    for path in candidates():
        if "/" in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            # RTLD_GLOBAL is not needed: libwgrt.so makes itself global before it loads Dawn.
            return declare(ctypes.CDLL(path))
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise OSError("wgrt: cannot load libwgrt.so; tried " + "; ".join(tried) +
                  " (hint: set WGRT_LIBRARY to the libwgrt.so of a wgrt build or install, "
                  "e.g. build/libwgrt.so)")


class ModelParams(ctypes.Structure):
    _fields_ = [("model_path", ctypes.c_char_p), ("n_ctx", ctypes.c_uint32),
                ("adapter_index", ctypes.c_int32), ("chat_template", ctypes.c_char_p),
                ("cache_type_k", ctypes.c_char_p), ("cache_type_v", ctypes.c_char_p)]


class LogitBias(ctypes.Structure):
    _fields_ = [("token", ctypes.c_int32), ("bias", ctypes.c_float)]


class SamplingParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("temperature", ctypes.c_float), ("top_k", ctypes.c_uint32),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float),
                ("repeat_last_n", ctypes.c_uint32), ("seed", ctypes.c_uint64), ("max_tokens", ctypes.c_int32),
                ("presence_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                ("logit_bias", ctypes.POINTER(LogitBias)), ("n_logit_bias", ctypes.c_size_t),
                ("stop", ctypes.POINTER(ctypes.c_char_p)), ("n_stop", ctypes.c_size_t),
                ("grammar", ctypes.c_char_p), ("json_schema", ctypes.c_char_p)]


class GenerateStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("stop_reason", ctypes.c_int), ("n_prompt", ctypes.c_int32),
                ("n_generated", ctypes.c_int32), ("prompt_seconds", ctypes.c_double),
                ("generate_seconds", ctypes.c_double)]


# wgrt_stop_reason's values, as last_stats() names them.
STOP_REASONS = {0: None, 1: "eos", 2: "length", 3: "stop", 4: "context", 5: "callback", 6: "cancelled"}


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


# int (*)(const char* text, size_t len, int32_t token, void* user); text as a pointer, since it
# may hold bytes a c_char_p would cut at a NUL.
TokenCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                                 ctypes.c_int32, ctypes.c_void_p)

OK = 0
CANCELLED = 1


def declare(lib):
    c = ctypes
    model_p = c.c_void_p
    sigs = {
        "wgrt_version": (c.c_char_p, []),
        "wgrt_last_error": (c.c_char_p, []),
        "wgrt_last_status": (c.c_int, []),
        "wgrt_status_name": (c.c_char_p, [c.c_int]),
        "wgrt_model_default_params": (ModelParams, []),
        "wgrt_model_load": (model_p, [c.POINTER(ModelParams)]),
        "wgrt_model_free": (None, [model_p]),
        "wgrt_tokenize": (c.c_int32, [model_p, c.c_char_p, c.c_size_t, c.c_int, c.c_int,
                                      c.POINTER(c.c_int32), c.c_int32]),
        "wgrt_detokenize": (c.c_int32, [model_p, c.POINTER(c.c_int32), c.c_int32, c.c_int,
                                        c.c_char_p, c.c_size_t]),
        "wgrt_sampling_default_params": (SamplingParams, []),
        "wgrt_generate": (c.c_int, [model_p, c.c_char_p, c.POINTER(SamplingParams), TokenCallback,
                                    c.c_void_p]),
        "wgrt_cancel": (None, [model_p]),
        "wgrt_last_generate_stats": (c.c_int, [model_p, c.POINTER(GenerateStats)]),
        "wgrt_chat": (c.c_int, [model_p, c.POINTER(ChatMessage), c.c_size_t, c.POINTER(SamplingParams),
                                TokenCallback, c.c_void_p]),
        "wgrt_model_n_embd": (c.c_int32, [model_p]),
        "wgrt_embed": (c.c_int32, [model_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_float), c.c_size_t]),
    }
    for name, (restype, argtypes) in sigs.items():
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = argtypes
    return lib
