#include "nn/hooks.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "nn/untrusted.h"

namespace gg::nn {

namespace {
const std::pair<const char*, HookPoint> kPoints[] = {
    {"resid_pre", HookPoint::resid_pre},   {"q", HookPoint::q},
    {"k", HookPoint::k},                   {"v", HookPoint::v},
    {"gate_logits", HookPoint::gate_logits}, {"gate", HookPoint::gate},
    {"scores", HookPoint::scores},         {"probs", HookPoint::probs},
    {"slot", HookPoint::slot},             {"z", HookPoint::z},
    {"attn_out", HookPoint::attn_out},     {"resid_mid", HookPoint::resid_mid},
    {"mlp_out", HookPoint::mlp_out},       {"resid_post", HookPoint::resid_post}};
}  // namespace

HookPoint parse_hook_point(const std::string& name) {
    std::string known;
    for (const auto& [n, p] : kPoints) {
        if (name == n) return p;
        known += (known.empty() ? "" : ", ") + std::string(n);
    }
    throw std::invalid_argument("hook point '" + printable(name) + "' is not one of " + known);
}

std::string hook_point_name(HookPoint p) {
    for (const auto& [n, x] : kPoints)
        if (x == p) return n;
    return "?";
}

const std::vector<HookPoint>& all_hook_points() {
    static const std::vector<HookPoint> points = [] {
        std::vector<HookPoint> out;
        for (const auto& entry : kPoints) out.push_back(entry.second);
        return out;
    }();
    return points;
}

bool Hooks::Entry::at(HookPoint p, int64_t layer) const {
    return point == p && (layers.empty() || std::ranges::find(layers, layer) != layers.end());
}

Hooks& Hooks::edit(HookPoint point, EditHook fn, std::vector<int64_t> layers) {
    if (point == HookPoint::slot)
        throw std::invalid_argument("Hooks::edit: slot is read only (it is 1 − Σ probs; edit probs or scores)");
    entries_.push_back({point, std::move(layers), std::move(fn), {}});
    return *this;
}

Hooks& Hooks::read(HookPoint point, ReadHook fn, std::vector<int64_t> layers) {
    entries_.push_back({point, std::move(layers), {}, std::move(fn)});
    return *this;
}

bool Hooks::any(HookPoint point, int64_t layer) const {
    return std::ranges::any_of(entries_, [&](const Entry& e) { return e.at(point, layer); });
}

bool Hooks::edits(HookPoint point, int64_t layer) const {
    return std::ranges::any_of(entries_, [&](const Entry& e) { return e.edit && e.at(point, layer); });
}

Tensor Hooks::run(HookPoint point, int64_t layer, const Tensor& x) const {
    Tensor out = x;
    for (const Entry& e : entries_) {
        if (!e.at(point, layer)) continue;
        if (!e.edit) {
            e.read(out, layer);
            continue;
        }
        Tensor edited = e.edit(out, layer);
        if (!edited.defined() || edited.shape() != x.shape())
            throw std::invalid_argument("hook " + hook_point_name(point) + " at layer " + std::to_string(layer) +
                                        ": an edit returned " +
                                        (edited.defined() ? shape_str(edited.shape()) : std::string("nothing")) +
                                        " for an activation " + shape_str(x.shape()));
        out = edited.dtype() == x.dtype() ? edited : edited.to(x.dtype());
    }
    return out;
}

void Hooks::check_layers(int64_t n_layers) const {
    for (const Entry& e : entries_)
        for (const int64_t l : e.layers)
            if (l < 0 || l >= n_layers)
                throw std::invalid_argument("hook " + hook_point_name(e.point) + ": layer " + std::to_string(l) +
                                            " is outside [0, " + std::to_string(n_layers) + ")");
}

}  // namespace gg::nn
