// names.h — an enum's values by name, as command lines and config files write them.
//
// One list gives both directions: parse, which ignores case and refuses a name it does not
// know with one line listing those it does ("gate function 'gelu' is not one of sigmoid,
// tanh, relu, silu, none"), and name, a value's first name in the list (later ones for the
// same value are accepted too: "sdpa" is "g1"). A new enum setting is its list beside the
// enum and its row in the table of settings (nn/config_fields.h), which takes the list:
//   inline const Names<ScoreFunction> kScoreFunctions{
//       "score function", {{"softmax", ScoreFunction::softmax}, {"sigmoid", ScoreFunction::sigmoid}}};
//   {"score_fn", at<&L::attn, &A::score_fn>(kScoreFunctions), "--score-fn", "...", keep},
#pragma once
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nn/untrusted.h"

namespace gg::nn {

template <class E>
class Names {
public:
    // `what` names the setting in messages; the names are written in lower case.
    Names(const char* what, std::initializer_list<std::pair<const char*, E>> names) : what_(what), names_(names) {}

    // The value of `name`, in any case ("G1" is "g1"); throws std::invalid_argument naming
    // what it is, the name as given (printable) and every name known.
    E parse(const std::string& name) const {
        std::string lower = name;
        std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        std::string known;
        for (const auto& [n, e] : names_) {
            if (lower == n) return e;
            known += (known.empty() ? "" : ", ") + std::string(n);
        }
        throw std::invalid_argument(std::string(what_) + " '" + printable(name) + "' is not one of " + known);
    }

    // The value's first name; "?" for a value the list does not have (an enum cast from a number).
    std::string name(E e) const {
        for (const auto& [n, x] : names_)
            if (x == e) return n;
        return "?";
    }

private:
    const char* what_;
    std::vector<std::pair<const char*, E>> names_;
};

}  // namespace gg::nn
