// The Python module kvcompress._core (nanobind): the stable C API of the core
// over numpy arrays and torch CPU tensors, without copies where the layout
// allows (float32, C-contiguous: anything else is converted once by the
// Python layer). A kvc_status other than KVC_OK becomes kvcompress.KvcError
// carrying the code and kvc_status_str's message. Python-level behaviour
// (budget spellings, defaults, docstrings) is in python/kvcompress/__init__.py.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kvc/kvc.h"

namespace nb = nanobind;

namespace
{

PyObject *g_error_class = nullptr; // kvcompress.KvcError

// Raised as kvcompress.KvcError(code, message).
struct status_error {
    int code;
    std::string message;
};

void check(kvc_status s, const char *what)
{
    if (s != KVC_OK) throw status_error{(int)s, std::string(what) + ": " + kvc_status_str(s)};
}

// A stream configuration from the command line's names (method, storage
// type, parameter name/value pairs), every refusal a status_error.
kvc_stream_config stream_config(const std::string &method, const std::string &dtype, uint32_t head_dim, uint32_t budget,
                                uint64_t seed, const std::vector<std::string> &params)
{
    kvc_method m;
    check(kvc_method_parse(method.c_str(), &m), ("method '" + method + "'").c_str());
    kvc_dtype t;
    check(kvc_dtype_parse(dtype.c_str(), &t), ("storage type '" + dtype + "'").c_str());
    kvc_stream_config c = kvc_stream_config_default(m, head_dim, head_dim, budget, seed);
    c.dtype = t;
    for (size_t i = 0; i + 1 < params.size(); i += 2)
        check(kvc_stream_config_set(&c, params[i].c_str(), params[i + 1].c_str()),
              ("parameter '" + params[i] + "' = '" + params[i + 1] + "'").c_str());
    return c;
}

using f32_matrix = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using f32_out = nb::ndarray<float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// A cache and the arena it lives in (caller memory for the core: this object owns it).
class cache
{
  public:
    cache(uint32_t n_layers, uint32_t n_heads, uint32_t n_kv_heads, uint32_t head_dim, const std::string &method,
          uint32_t budget, const std::string &dtype, uint64_t seed, const std::vector<std::string> &params)
    {
        std::memset(&cfg_, 0, sizeof cfg_);
        cfg_.n_layers = n_layers, cfg_.n_heads = n_heads, cfg_.n_kv_heads = n_kv_heads, cfg_.head_dim = head_dim;
        cfg_.policy = KVC_BUDGET_UNIFORM;
        cfg_.stream = stream_config(method, dtype, head_dim, budget, seed, params);
        if (const char *why = kvc_cache_config_problem(&cfg_)) throw status_error{(int)KVC_E_ARG, why};
        bytes_ = kvc_cache_arena_bytes(&cfg_);
        allocate(bytes_);
        check(kvc_cache_init(arena_.get(), bytes_, &cfg_, &c_), "kvc_cache_init");
    }

    // A snapshot's bytes, validated before use (kvc_cache_validate).
    explicit cache(nb::bytes snapshot)
    {
        bytes_ = snapshot.size();
        allocate(bytes_);
        std::memcpy(arena_.get(), snapshot.c_str(), bytes_);
        check(kvc_cache_validate(arena_.get(), bytes_), "snapshot");
        c_ = static_cast<kvc_cache *>(arena_.get()); // the cache state is at the start of its arena
    }

    void append(uint32_t layer, f32_matrix k, f32_matrix v)
    {
        need(k, cfg_kv_heads(), "k"), need(v, cfg_kv_heads(), "v");
        check(kvc_cache_append(c_, nullptr, layer, k.data(), v.data()), "append");
    }

    void attend(uint32_t layer, f32_matrix q, f32_out out) const
    {
        need(q, heads(), "q");
        if (out.shape(0) != heads() || out.shape(1) != head_dim())
            throw status_error{(int)KVC_E_ARG, "out: wrong shape"};
        check(kvc_cache_attend(c_, nullptr, layer, q.data(), out.data()), "attend");
    }

    nb::bytes snapshot() const { return nb::bytes(static_cast<const char *>(arena_.get()), bytes_); }
    size_t arena_bytes() const { return bytes_; }
    std::vector<uint64_t> usage() const
    {
        uint64_t e = 0, pe = 0, b = 0, pb = 0;
        check(kvc_cache_get_usage(c_, &e, &pe), "usage");
        check(kvc_cache_get_usage_bytes(c_, &b, &pb), "usage");
        return {e, pe, b, pb};
    }
    uint64_t checksum() const { return kvc_cache_checksum(c_); }
    uint32_t heads() const { return kvc_cache_get_config(c_)->n_heads; }
    uint32_t cfg_kv_heads() const { return kvc_cache_get_config(c_)->n_kv_heads; }
    uint32_t head_dim() const { return kvc_cache_get_config(c_)->head_dim; }
    uint32_t layers() const { return kvc_cache_get_config(c_)->n_layers; }

  private:
    struct freer {
        void operator()(void *p) const { std::free(p); }
    };
    void allocate(size_t bytes)
    {
        void *p =
            std::aligned_alloc(KVC_ARENA_ALIGN, (bytes + KVC_ARENA_ALIGN - 1) / KVC_ARENA_ALIGN * KVC_ARENA_ALIGN);
        if (p == nullptr) throw std::bad_alloc();
        arena_.reset(p);
    }
    void need(const f32_matrix &a, uint32_t rows, const char *name) const
    {
        if (a.shape(0) != rows || a.shape(1) != head_dim())
            throw status_error{(int)KVC_E_ARG, std::string(name) + ": want shape (" + std::to_string(rows) + ", " +
                                                   std::to_string(head_dim()) + ")"};
    }
    kvc_cache_config cfg_;
    std::unique_ptr<void, freer> arena_;
    size_t bytes_ = 0;
    kvc_cache *c_ = nullptr;
};

} // namespace

NB_MODULE(_core, m)
{
    m.doc() = "kvcompress's C core (use the kvcompress package, not this module)";
    // kvcompress.KvcError (defined in Python) is given once at import: a
    // status_error becomes KvcError(code, message)
    m.def("set_error_class", [](nb::object cls) { g_error_class = cls.release().ptr(); });
    nb::register_exception_translator([](const std::exception_ptr &p, void *) {
        try {
            std::rethrow_exception(p);
        } catch (const status_error &e) {
            PyObject *cls = g_error_class != nullptr ? g_error_class : PyExc_RuntimeError;
            PyErr_SetObject(cls, nb::make_tuple(e.code, e.message).ptr());
        }
    });
    m.def("methods", [] {
        nb::list out;
        for (size_t i = 0; i < kvc_method_count(); i++) {
            const kvc_method mm = kvc_method_at(i);
            nb::list params;
            for (size_t j = 0; j < kvc_method_param_count(mm); j++) {
                const kvc_param_desc *d = kvc_method_param_at(mm, j);
                nb::dict p;
                p["name"] = d->name;
                p["type"] = d->type == KVC_PARAM_U32 ? "int" : d->type == KVC_PARAM_F32 ? "float" : "choice";
                p["min"] = d->min, p["max"] = d->max;
                p["choices"] = d->choices ? d->choices : "";
                p["default"] = d->dflt ? d->dflt : "";
                p["help"] = d->help ? d->help : "";
                params.append(p);
            }
            nb::dict e;
            e["name"] = kvc_method_name(mm);
            e["summary"] = kvc_method_summary(mm);
            const char *kp = kvc_method_kvpress_name(mm);
            e["kvpress"] = kp ? nb::cast(kp) : nb::none();
            e["observes"] = kvc_method_observes(mm) != 0;
            e["params"] = params;
            out.append(e);
        }
        return out;
    });
    m.def("dtypes", [] {
        nb::list out;
        for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++)
            if (kvc_dtype_implemented((kvc_dtype)t)) out.append(kvc_dtype_name((kvc_dtype)t));
        return out;
    });
    nb::class_<cache>(m, "Cache")
        .def(nb::init<uint32_t, uint32_t, uint32_t, uint32_t, const std::string &, uint32_t, const std::string &,
                      uint64_t, const std::vector<std::string> &>())
        .def(nb::init<nb::bytes>())
        .def("append", &cache::append)
        .def("attend", &cache::attend)
        .def("snapshot", &cache::snapshot)
        .def("arena_bytes", &cache::arena_bytes)
        .def("usage", &cache::usage)
        .def("checksum", &cache::checksum)
        .def_prop_ro("n_layers", &cache::layers)
        .def_prop_ro("n_heads", &cache::heads)
        .def_prop_ro("n_kv_heads", &cache::cfg_kv_heads)
        .def_prop_ro("head_dim", &cache::head_dim);
    m.def("stream_budget_for_bytes", [](const std::string &method, const std::string &dtype, uint32_t head_dim,
                                        uint64_t bytes, const std::vector<std::string> &params) {
        const kvc_stream_config c = stream_config(method, dtype, head_dim, 1, 1, params);
        return kvc_stream_budget_for_bytes(&c, bytes);
    });
    m.def("stream_arena_bytes",
          [](const std::string &method, const std::string &dtype, uint32_t head_dim, uint32_t budget) {
              const kvc_stream_config c = stream_config(method, dtype, head_dim, budget, 1, {});
              return kvc_stream_arena_bytes(&c);
          });
}
