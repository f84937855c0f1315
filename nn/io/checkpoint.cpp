// checkpoint.cpp — gg::Tensors to and from safetensors files, and all-or-nothing loading.
#include "nn/io/checkpoint.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "nn/io/safetensors.h"
#include "nn/untrusted.h"

namespace gg::nn {

// Tensor bytes go to and from the file as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "checkpoint: the byte copies assume a little-endian host");

namespace {

// gatedgrad's dtypes and their safetensors spelling.
constexpr std::pair<DType, const char*> kDTypes[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::bf16, "BF16"}, {DType::i64, "I64"}};

[[noreturn]] void fail(const std::string& path, const std::string& msg) {
    throw std::runtime_error("checkpoint: " + path + ": " + msg);
}


// Runs a call into the safetensors layer, whose errors read "safetensors: <path>: ...",
// and rethrows its errors as checkpoint errors on the same path.
template <class F>
auto as_checkpoint_errors(const std::string& path, F&& f) {
    try {
        return f();
    } catch (const std::exception& e) {
        std::string msg = e.what();
        const std::string prefix = "safetensors: " + path + ": ";
        if (msg.starts_with(prefix)) msg.erase(0, prefix.size());
        fail(path, msg);
    }
}

struct Contents {
    Metadata metadata;
    NamedTensors tensors;
};

Contents read(const std::string& path) {
    const SafetensorsFile file = as_checkpoint_errors(path, [&] { return read_safetensors(path); });
    Contents out{file.metadata, {}};
    for (const SafetensorsEntry& e : file.entries) {
        const auto* known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                         [&](const auto& d) { return e.dtype == d.second; });
        if (known == std::end(kDTypes))
            fail(path, "tensor '" + printable(e.name) + "' has dtype " + e.dtype +
                           ", which gatedgrad does not support (F32, F64, BF16, I64)");
        const Tensor t = Tensor::empty(e.shape, known->first);
        std::copy(e.bytes.begin(), e.bytes.end(), static_cast<uint8_t*>(t.view_desc().data));
        out.tensors.emplace_back(e.name, t);
    }
    return out;
}

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
    SafetensorsFile file{metadata, {}};
    for (const auto& [name, t] : tensors) {
        check_defined(t, ("checkpoint: " + path + ": tensor '" + name + "'").c_str());
        const Tensor host = t.detach().to(Device::CPU).contiguous();  // row-major bytes
        const auto* bytes = static_cast<const uint8_t*>(host.view_desc().data);
        const auto* dtype = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                         [&](const auto& d) { return host.dtype() == d.first; });
        file.entries.push_back({name, dtype->second, host.shape(),
                                std::vector<uint8_t>(bytes, bytes + host.numel() * dtype_size(host.dtype()))});
    }
    as_checkpoint_errors(path, [&] { write_safetensors(path, file); });
}

NamedTensors load_tensors(const std::string& path, Metadata* metadata) {
    Contents file = read(path);
    if (metadata) *metadata = std::move(file.metadata);
    return std::move(file.tensors);
}

void save(const Module& module, const std::string& path, const Metadata& metadata, const NamedTensors& extra) {
    NamedTensors tensors = module.state_dict();
    tensors.insert(tensors.end(), extra.begin(), extra.end());
    save_tensors(path, tensors, metadata);
}

void export_model(const Module& module, const std::string& path, DType dtype, const Metadata& metadata) {
    if (!is_floating(dtype))
        throw std::invalid_argument(std::string("export: ") + path + ": weights are exported as a floating dtype, not " +
                                    dtype_name(dtype));
    NamedTensors tensors;
    for (const auto& [name, t] : module.state_dict())
        tensors.emplace_back(name, t.dtype() == DType::f32 ? t.detach().to(dtype) : t);
    save_tensors(path, tensors, metadata);
}

Metadata load(Module& module, const std::string& path, NamedTensors* extra) {
    const Contents file = read(path);
    NamedTensors targets = module.state_dict();
    const bool with_extra = extra && !extra->empty();
    if (with_extra) targets.insert(targets.end(), extra->begin(), extra->end());
    check_finite(file.tensors, "checkpoint: " + path);
    copy_state(targets, file.tensors, "checkpoint: " + path, "the file", with_extra ? "the model and extras" : "the model");
    return file.metadata;
}

std::shared_ptr<GatedTransformerLM> load_checkpoint(const std::string& path, uint64_t memory, Metadata* metadata_out) {
    // One read: the config from the metadata, then the weights (not the optimiser/trainer state).
    Metadata metadata;
    const NamedTensors tensors = load_tensors(path, &metadata);
    const std::string context = "checkpoint: " + path;
    auto it = metadata.find("config");
    if (it == metadata.end()) throw std::runtime_error(context + ": no model config in its metadata (not a gatedgrad model?)");
    // The config is checked before the model it describes is built: a file's few bytes of
    // metadata must not be able to ask for terabytes.
    LMConfig config;
    try {
        config = LMConfig::from_json(it->second);
        check_memory(config, Workload::weights, 0, 0, memory);
    } catch (const std::invalid_argument& e) {
        throw std::runtime_error(context + ": " + e.what());
    }
    NamedTensors wanted;
    for (const auto& [name, t] : tensors)
        if (name.rfind("optim.", 0) != 0 && name.rfind("trainer.", 0) != 0)
            // An export in bfloat16 (gatedgrad export's default) widens exactly to the float32 model.
            wanted.emplace_back(name, t.dtype() == DType::bf16 ? t.to(DType::f32) : t);
    check_finite(wanted, context);
    // copy_state writes every weight (or throws): drawing random ones first would only cost time.
    const std::shared_ptr<GatedTransformerLM> model = [&] {
        const SkipInit skip_init;
        return std::make_shared<GatedTransformerLM>(config);
    }();
    copy_state(model->state_dict(), wanted, context, "the file", "the model");
    if (metadata_out) *metadata_out = std::move(metadata);
    return model;
}

void check_finite(const NamedTensors& tensors, const std::string& context) {
    for (const auto& [name, t] : tensors) {
        if (!t.defined() || !is_floating(t.dtype())) continue;
        const Tensor host = t.detach().to(Device::CPU).contiguous();
        const auto first_bad = [&]<class T>() {
            const T* x = host.data<const T>();
            const int64_t i = std::find_if(x, x + host.numel(), [](T v) { return !std::isfinite(v); }) - x;
            return i < host.numel() ? std::optional<double>(x[i]) : std::nullopt;
        };
        std::optional<double> bad;
        dispatch_with_bf16(host.dtype(), [&]<class T>() { bad = first_bad.operator()<T>(); });
        if (bad)
            throw std::runtime_error(context + ": tensor '" + printable(name) + "' holds " +
                                     (std::isnan(*bad) ? "a NaN" : "an infinity"));
    }
}

NamedTensors with_prefix(const std::string& prefix, const NamedTensors& tensors) {
    NamedTensors out;
    for (const auto& [name, t] : tensors) out.emplace_back(prefix + name, t);
    return out;
}

}  // namespace gg::nn
