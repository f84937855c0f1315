// backend.cpp — which table serves which device.
#include "tensor/backend.h"

#include <map>
#include <stdexcept>
#include <string>

namespace gg {

const Backend& cpu_backend_table();  // cpu/backend.cpp

namespace {
// Tables registered by hand (register_backend); the CPU's from the start.
std::map<Device, const Backend*>& tables() {
    static std::map<Device, const Backend*> registered{{Device::CPU, &cpu_backend_table()}};
    return registered;
}

// What each device's folder registered (register_backend_provider).
struct Provider {
    const Backend* (*table)();
    std::string (*why_missing)();
};
std::map<Device, Provider>& providers() {
    static std::map<Device, Provider> registered;
    return registered;
}

// The table registered by hand, else the one the device's provider picks.
const Backend* find(Device device) {
    if (const auto it = tables().find(device); it != tables().end()) return it->second;
    if (const auto it = providers().find(device); it != providers().end()) return it->second.table();
    return nullptr;
}
}  // namespace

const Backend& backend(Device device) {
    if (const Backend* table = find(device)) return *table;
    // The provider says why its device is missing, in one line.
    const auto it = providers().find(device);
    if (it != providers().end()) throw std::runtime_error(it->second.why_missing());
    throw std::runtime_error(std::string("no ") + device_name(device) +
                             " backend: nothing in this program registered one (gatedgrad.h does)");
}

View make_view(void* data, DType dtype, const Shape& shape, const Strides& strides) {
    if (shape.size() > static_cast<size_t>(kMaxDims))
        throw std::invalid_argument("tensor of shape " + shape_str(shape) + " has " + std::to_string(shape.size()) +
                                    " dims; at most " + std::to_string(kMaxDims) + " are supported");
    View v;
    v.data = data;
    v.dtype = dtype;
    v.ndim = static_cast<int>(shape.size());
    for (int d = 0; d < v.ndim; ++d) v.shape[d] = shape[d], v.strides[d] = strides[d];
    return v;
}

View matrix_view(const View& v, int64_t rows, int64_t cols) {
    return make_view(v.data, v.dtype, {rows, cols}, {cols, 1});
}

void check_logits_and_targets(const char* op, const View& logits, const View& targets) {
    if (logits.ndim == 2 && targets.ndim == 1 && targets.shape[0] == logits.shape[0] && targets.dtype == DType::i64)
        return;
    const auto shape_of = [](const View& v) { return shape_str(Shape(v.shape, v.shape + v.ndim)); };
    throw std::invalid_argument(std::string(op) + ": logits must be (N, V) and targets int64 (N), got logits " +
                                shape_of(logits) + " and " + dtype_name(targets.dtype) + " targets " +
                                shape_of(targets));
}

void check_contiguous_floats(const char* op, std::span<const View> xs) {
    for (size_t i = 0; i < xs.size(); ++i) {
        const View& x = xs[i];
        const bool floating = x.dtype == DType::f32 || x.dtype == DType::f64 || x.dtype == DType::bf16;
        // Row-major strides, where a dim of size 1 may have any stride (it is never stepped).
        bool contiguous = true;
        int64_t expected = 1;
        for (int d = x.ndim - 1; d >= 0; --d) {
            if (x.shape[d] != 1 && x.strides[d] != expected) contiguous = false;
            expected *= x.shape[d];
        }
        if (floating && (contiguous || expected == 0)) continue;
        throw std::invalid_argument(std::string(op) + ": tensor " + std::to_string(i) + " (" + dtype_name(x.dtype) +
                                    " " + shape_str(Shape(x.shape, x.shape + x.ndim)) + ", strides " +
                                    shape_str(Shape(x.strides, x.strides + x.ndim)) +
                                    ") must be a contiguous f32, f64 or bf16 tensor");
    }
}

bool device_available(Device device) { return find(device) != nullptr; }

void register_backend_provider(Device device, const Backend* (*table)(), std::string (*why_missing)()) {
    providers()[device] = {table, why_missing};
}

void register_backend(Device device, const Backend* table) {
    if (table)
        tables()[device] = table;
    else
        tables().erase(device);
}

}  // namespace gg
