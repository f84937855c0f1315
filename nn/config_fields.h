// config_fields.h — every setting of a model and of a training run, described once.
//
// LMConfig (nn/transformer.h) and TrainConfig (nn/train/train_config.h) stay plain structs,
// whose defaults and comments document a run. Beside each is a table, one row a field:
//
//   key     its name in the JSON                     "n_heads"
//   value   where it lives (through nested structs: LMConfig → attn → n_heads), its type
//           and its check: a Range for a number, the list of names of an enum (nn/names.h)
//   flag    its option of gatedgrad train, or none   "--heads"
//   help    one line that says what it is (train's --help adds the default after it)
//   resume  what a resumed run may do with it        Resume::architecture
//
// Everything else about a field is read off its row: to_json and from_json (nn/json_fields.h;
// a field the JSON leaves out keeps the default-constructed struct's value), the range
// checks of validate(), train's options with their --help and defaults
// (apps/config_options.h), what a resumed run may change and the lines train prints about a
// run (apps/describe.cpp). A program's own settings can be rows too: tutorial 06's
// options are those of its setups (copy_setup_fields()).
//
// To add a setting:
//   1. the field, with its default and a comment, in its struct (LMConfig, AttentionOptions,
//      RopeOptions, TrainConfig, CorpusSplit);
//   2. its row, where it should come in the JSON and in --help: lm_config_fields() in
//      nn/config_fields.cpp for the model's, train_config_fields() in nn/train/train_config.cpp
//      for the training's. A new enum needs its list of names beside its type (nn/names.h
//      shows one); the row takes the list, or the parse and name functions made from it.
// validate() is written by hand only for what ties fields together (heads dividing d_model).
// tests/test_config_fields.cpp fails on a member of the structs that has no row, and puts
// every row through JSON, the command line, the resume check and train's description of a run.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "nn/names.h"
#include "nn/transformer.h"
#include "tensor/dtype.h"

namespace gg::nn {

// ---------------------------------------------------------------- ranges

// The interval a number must lie in: [low, high], with an end open where said. A floating
// number must also be finite, so an infinite end is never reached: Range<double>{0} is
// [0, inf), and NaN lies in no range. Whole-number ranges are closed. Every check of a
// number uses one: validate()'s ("LMConfig: n_layers 2000 is outside [0, 1024]") and the
// command line's ("must be a whole number between 0 and 1024, got 2000").
template <class T>
struct Range {
    static constexpr bool floating = std::is_floating_point_v<T>;
    T low = floating ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    T high = floating ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    bool low_open = false, high_open = false;

    bool contains(T x) const {
        if constexpr (floating)
            if (!std::isfinite(x)) return false;
        return (low_open ? x > low : x >= low) && (high_open ? x < high : x <= high);
    }

    static std::string number(T x) {
        if constexpr (floating) {
            char text[32];
            std::snprintf(text, sizeof text, "%g", double(x));
            return text;
        } else {
            return std::to_string(x);
        }
    }

    // In the notation of intervals: "[0, 1024]", "(0, 0.5]", "[0, inf)".
    std::string text() const {
        const bool open_low = low_open || (floating && std::isinf(double(low)));
        const bool open_high = high_open || (floating && std::isinf(double(high)));
        std::string text = open_low ? "(" : "[";
        text += number(low) + ", " + number(high);
        text += open_high ? ")" : "]";
        return text;
    }

    // In words, for a command line: "a whole number between 0 and 1024", "between 0 and 1",
    // "a finite number above 0", "above 0 and at most 0.5".
    std::string words() const {
        if constexpr (!floating) {
            return "a whole number between " + number(low) + " and " + number(high);
        } else {
            const bool bounded = std::isfinite(high);
            if (bounded && !low_open && !high_open) return "between " + number(low) + " and " + number(high);
            std::string w = bounded ? "" : "a finite number ";
            w += (low_open ? "above " : "at least ") + number(low);
            if (bounded) w += (high_open ? " and below " : " and at most ") + number(high);
            return w;
        }
    }

    // Throws std::invalid_argument "<what>: <field> <value> is outside <text()>".
    void check(const std::string& what, const std::string& field, T value) const {
        if (!contains(value))
            throw std::invalid_argument(what + ": " + field + " " + number(value) + " is outside " + text());
    }
};

// ---------------------------------------------------------------- a row

// What a resumed run (train --resume) may do with a field.
enum class Resume {
    may_change,    // change it; the change is printed ("--lr 0.003 → 0.01")
    architecture,  // the model's shape or function: a resumed run keeps it, or is refused
    not_compared,  // the run's own record (its id, folder, data), or judged with another field
};

// Where a field lives in a Config: read and written through nested members.
template <class Config, class T>
struct Member {
    std::function<T&(Config&)> at;
    std::function<const T&(const Config&)> get;
};

// A number and the range it must lie in. `zero`: what 0 stands for, shown in its place
// (the key/value heads: "--heads").
template <class Config, class T>
struct Number {
    Member<Config, T> member;
    Range<T> range;
    const char* zero = nullptr;
};

// Yes or no. Its flag sets it to `flag_sets` (--no-ffn: ffn = false); shown as "on" when
// it is what the flag sets.
template <class Config>
struct Switch {
    Member<Config, bool> member;
    bool flag_sets = true;
};

// An enum, or a list of one enum's values (one per layer, say), known by name: through the
// enum's list of names (nn/names.h), or its parse and name functions (parse_gate_position,
// gate_position_name). A name the parser refuses is refused with the parser's message. The
// name function names any value of the type ("?" for one the enum does not have), as the
// library's do. Spelling: how the field is written, one name (std::string) or a list of them.
template <class Config, class Spelling = std::string>
struct Choice {
    std::function<Spelling(const Config&)> name;        // the value's name (the values' names)
    std::function<void(Config&, const Spelling&)> set;  // parses names into the field
    std::function<void(const std::string&)> parse;      // throws unless it knows the name
    // Whether each value's name parses back to it (not so for an enum cast from a number).
    std::function<bool(const Config&)> named;
    // The names of every value the enum (class) has: of the first 64, those whose name parses back.
    std::function<std::vector<std::string>()> names;
    std::function<const void*(const Config&)> address;  // where it lives (tests)
};

// A text or a list of texts (paths, ids): no check of its own.
template <class Config, class T>
struct Text {
    Member<Config, T> member;
};

template <class Config>
using Value = std::variant<Number<Config, int64_t>, Number<Config, uint64_t>, Number<Config, double>, Switch<Config>,
                           Choice<Config>, Choice<Config, std::vector<std::string>>, Text<Config, std::string>,
                           Text<Config, std::vector<std::string>>>;

template <class V>
constexpr bool is_choice = false;
template <class Config, class Spelling>
constexpr bool is_choice<Choice<Config, Spelling>> = true;

template <class Config>
struct Field {
    const char* key;               // its name in the JSON
    Value<Config> value;           // where it lives, its type and its check: at<...>(...)
    const char* flag = nullptr;    // its option of gatedgrad train; none: only a config file sets it
    const char* help = nullptr;    // one line: what it is
    Resume resume = Resume::may_change;
    const char* metavar = nullptr;  // its value's name in --help ("M"); none: its type's (INT, FLOAT, TEXT)
};

template <class Config>
using Fields = std::vector<Field<Config>>;

// ---------------------------------------------------------------- making a row's value

namespace detail {
template <class M>
struct member_of;
template <class C, class T>
struct member_of<T C::*> {
    using owner = C;
    using type = T;
};
template <auto... path>
using owner_t = typename member_of<std::tuple_element_t<0, std::tuple<decltype(path)...>>>::owner;
template <auto... path>
using type_t = typename member_of<std::tuple_element_t<sizeof...(path) - 1, std::tuple<decltype(path)...>>>::type;

template <class T>
struct enum_of {
    using type = T;
};
template <class E>
struct enum_of<std::vector<E>> {
    using type = E;
};
template <class T>
constexpr bool is_enum_list = !std::is_same_v<typename enum_of<T>::type, T> && std::is_enum_v<typename enum_of<T>::type>;

template <class C, auto... path>
auto& reach(C& c) {
    return (c .* ... .* path);
}
template <auto... path, class C = owner_t<path...>, class T = type_t<path...>>
Member<C, T> member() {
    return {[](C& c) -> T& { return reach<C, path...>(c); },
            [](const C& c) -> const T& { return reach<const C, path...>(c); }};
}
}  // namespace detail

// at<&LMConfig::attn, &AttentionOptions::n_heads>(check): the field at the end of that path
// of members, with the check its type takes. A number: its range (and what 0 stands for).
template <auto... path, class C = detail::owner_t<path...>, class T = detail::type_t<path...>>
    requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
Value<C> at(Range<T> range, const char* zero = nullptr) {
    return Number<C, T>{detail::member<path...>(), range, zero};
}

// A switch, and what its flag sets it to.
template <auto... path, class C = detail::owner_t<path...>, class T = detail::type_t<path...>>
    requires std::is_same_v<T, bool>
Value<C> at(bool flag_sets = true) {
    return Switch<C>{detail::member<path...>(), flag_sets};
}

// A text or a list of texts.
template <auto... path, class C = detail::owner_t<path...>, class T = detail::type_t<path...>>
    requires(std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<std::string>>)
Value<C> at() {
    return Text<C, T>{detail::member<path...>()};
}

// An enum, or a list of an enum's values, by the enum's parse and name functions.
template <auto... path, class C = detail::owner_t<path...>, class T = detail::type_t<path...>, class Parse, class Name>
    requires(std::is_enum_v<T> || detail::is_enum_list<T>)
Value<C> at(Parse parse, Name name) {
    using E = typename detail::enum_of<T>::type;
    using Spelling = std::conditional_t<std::is_enum_v<T>, std::string, std::vector<std::string>>;
    const Member<C, T> m = detail::member<path...>();
    const auto named = [=](E e) {
        try {
            return parse(std::string(name(e))) == e;
        } catch (const std::invalid_argument&) {
            return false;
        }
    };
    Choice<C, Spelling> choice;
    if constexpr (std::is_enum_v<T>) {
        choice.name = [=](const C& c) { return std::string(name(m.get(c))); };
        choice.set = [=](C& c, const std::string& text) { m.at(c) = parse(text); };
        choice.named = [=](const C& c) { return named(m.get(c)); };
    } else {
        choice.name = [=](const C& c) {
            Spelling out;
            for (const E e : m.get(c)) out.push_back(std::string(name(e)));
            return out;
        };
        choice.set = [=](C& c, const Spelling& texts) {
            T values;
            for (const std::string& text : texts) values.push_back(parse(text));
            m.at(c) = values;
        };
        choice.named = [=](const C& c) { return std::all_of(m.get(c).begin(), m.get(c).end(), named); };
    }
    choice.parse = [=](const std::string& text) { parse(text); };
    choice.names = [=] {
        std::vector<std::string> all;
        for (int i = 0; i < 64; ++i)
            if (named(static_cast<E>(i))) all.push_back(std::string(name(static_cast<E>(i))));
        return all;
    };
    choice.address = [=](const C& c) -> const void* { return &m.get(c); };
    return choice;
}

// An enum, or a list of an enum's values, by the enum's list of names (nn/names.h).
template <auto... path, class C = detail::owner_t<path...>, class T = detail::type_t<path...>,
          class E = typename detail::enum_of<T>::type>
    requires(std::is_enum_v<T> || detail::is_enum_list<T>)
Value<C> at(const Names<E>& names) {
    return at<path...>([names](const std::string& text) { return names.parse(text); },
                       [names](E e) { return names.name(e); });
}

// ---------------------------------------------------------------- what the rows give

// How messages name a field: its flag, or its key where it has none.
template <class Config>
std::string name(const Field<Config>& field) {
    return field.flag ? field.flag : field.key;
}

// A field's value as a command line writes it: "0.003", "g1", "on"; a list joined by spaces.
template <class Config>
std::string text(const Field<Config>& field, const Config& c) {
    return std::visit(
        [&](const auto& v) -> std::string {
            using V = std::decay_t<decltype(v)>;
            const auto joined = [](const auto& items) {
                if constexpr (std::is_same_v<std::decay_t<decltype(items)>, std::string>) {
                    return items;
                } else {
                    std::string all;
                    for (const std::string& item : items) all += (all.empty() ? "" : " ") + item;
                    return all;
                }
            };
            if constexpr (is_choice<V>) {
                return joined(v.name(c));
            } else if constexpr (std::is_same_v<V, Switch<Config>>) {
                return v.member.get(c) == v.flag_sets ? "on" : "off";
            } else if constexpr (std::is_same_v<V, Text<Config, std::string>> ||
                                 std::is_same_v<V, Text<Config, std::vector<std::string>>>) {
                return joined(v.member.get(c));
            } else {
                const auto x = v.member.get(c);
                if (v.zero && x == 0) return v.zero;
                if constexpr (std::is_floating_point_v<decltype(x)>) {
                    char shown[32];  // as an ostream shows it: six significant digits
                    std::snprintf(shown, sizeof shown, "%g", x);
                    return shown;
                } else {
                    return std::to_string(x);
                }
            }
        },
        field.value);
}

// Where a field lives in `c` (tests: that every member of a config has a row).
template <class Config>
const void* address(const Field<Config>& field, const Config& c) {
    return std::visit(
        [&](const auto& v) -> const void* {
            if constexpr (is_choice<std::decay_t<decltype(v)>>) return v.address(c);
            else return &v.member.get(c);
        },
        field.value);
}

// Checks every field against its range or names; throws std::invalid_argument naming the
// config (`what`), the first field out of range, its value and what it must be.
template <class Config>
void check_fields(const Fields<Config>& fields, const Config& c, const std::string& what) {
    for (const Field<Config>& field : fields)
        std::visit(
            [&](const auto& v) {
                using V = std::decay_t<decltype(v)>;
                if constexpr (is_choice<V>) {
                    if (v.named(c)) return;
                    std::string names;
                    for (const std::string& n : v.names()) names += (names.empty() ? "" : ", ") + n;
                    throw std::invalid_argument(what + ": " + field.key + " " + text(field, c) + " is not " +
                                                (std::is_same_v<V, Choice<Config>> ? "" : "each ") + "one of " + names);
                } else if constexpr (requires { v.range; }) {
                    v.range.check(what, field.key, v.member.get(c));
                }
            },
            field.value);
}

namespace detail {
template <class Outer, class Inner, class T>
Member<Outer, T> lift(const Member<Inner, T>& m, Inner Outer::*inner) {
    return {[=](Outer& o) -> T& { return m.at(o.*inner); }, [=](const Outer& o) -> const T& { return m.get(o.*inner); }};
}
template <class Outer, class Inner, class T>
Value<Outer> lift(const Number<Inner, T>& v, Inner Outer::*inner) {
    return Number<Outer, T>{lift(v.member, inner), v.range, v.zero};
}
template <class Outer, class Inner>
Value<Outer> lift(const Switch<Inner>& v, Inner Outer::*inner) {
    return Switch<Outer>{lift(v.member, inner), v.flag_sets};
}
template <class Outer, class Inner, class T>
Value<Outer> lift(const Text<Inner, T>& v, Inner Outer::*inner) {
    return Text<Outer, T>{lift(v.member, inner)};
}
template <class Outer, class Inner, class Spelling>
Value<Outer> lift(const Choice<Inner, Spelling>& v, Inner Outer::*inner) {
    return Choice<Outer, Spelling>{[=](const Outer& o) { return v.name(o.*inner); },
                                   [=](Outer& o, const Spelling& names) { v.set(o.*inner, names); },
                                   v.parse,
                                   [=](const Outer& o) { return v.named(o.*inner); },
                                   v.names,
                                   [=](const Outer& o) { return v.address(o.*inner); }};
}
}  // namespace detail

// The rows of Inner as rows of an Outer that holds it in `inner` (a TrainConfig's model).
template <class Outer, class Inner>
Fields<Outer> lift(const Fields<Inner>& fields, Inner Outer::*inner) {
    Fields<Outer> out;
    for (const Field<Inner>& f : fields)
        out.push_back({f.key, std::visit([&](const auto& v) { return detail::lift(v, inner); }, f.value), f.flag, f.help,
                       f.resume, f.metavar});
    return out;
}

// The rows with these keys, in this order; throws on a key no row has.
template <class Config>
Fields<Config> fields_named(const Fields<Config>& fields, const std::vector<std::string>& keys) {
    Fields<Config> out;
    for (const std::string& key : keys) {
        const Field<Config>* found = nullptr;
        for (const Field<Config>& field : fields)
            if (key == field.key) found = &field;
        if (!found) throw std::invalid_argument("no config field is named '" + key + "'");
        out.push_back(*found);
    }
    return out;
}

// A field whose value differs between two configs, as text.
template <class Config>
struct Difference {
    const Field<Config>* field;
    std::string was, now;
};

// The fields (but those a resume does not compare) whose text differs from `was` to `now`,
// in the rows' order.
template <class Config>
std::vector<Difference<Config>> differences(const Fields<Config>& fields, const Config& was, const Config& now) {
    std::vector<Difference<Config>> out;
    for (const Field<Config>& field : fields)
        if (field.resume != Resume::not_compared)
            if (std::string a = text(field, was), b = text(field, now); a != b) out.push_back({&field, a, b});
    return out;
}

// ---------------------------------------------------------------- the model's rows

// LMConfig's rows, in the order of its JSON (nn/config_fields.cpp).
const Fields<LMConfig>& lm_config_fields();

// The config as its JSON spells it: the sizes a config may leave to a rule written out
// (n_kv_heads 0: n_heads; d_ff 0: 8/3 · d_model rounded up to a multiple of 8).
LMConfig spelled_out(LMConfig c);

// A training precision by name: "f32" (or "float32") and "bf16" (or "bfloat16"); anything else
// throws naming what is accepted. precision_name gives the short name back (another dtype: its
// own name, which parse_precision refuses).
DType parse_precision(const std::string& name);
const char* precision_name(DType precision);

}  // namespace gg::nn
