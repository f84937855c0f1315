#include "tensor/random.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace gg {

namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// splitmix64 spreads one seed over xoshiro's 256 bits of state.
uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
}  // namespace

void Generator::manual_seed(uint64_t seed) {
    for (auto& word : s_) word = splitmix64(seed);
}

void Generator::set_state(const std::array<uint64_t, 4>& s) {
    if (s == std::array<uint64_t, 4>{})
        throw std::invalid_argument("Generator::set_state: the all-zero state is not a state of xoshiro256**");
    s_ = s;
}

uint64_t Generator::next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
    // Box–Muller; 1 - u keeps the log's argument in (0, 1].
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t Generator::randint(int64_t low, int64_t high) {
    if (high <= low)
        throw std::invalid_argument("randint: empty range [" + std::to_string(low) + ", " +
                                    std::to_string(high) + ")");
    return low + static_cast<int64_t>(next_u64() % static_cast<uint64_t>(high - low));
}

Generator& default_generator() {
    static Generator gen(0);
    return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {
template <class Draw>
Tensor draw_on_host(const Shape& shape, DType dtype, Device device, Draw draw) {
    Tensor host = Tensor::empty(shape, dtype, Device::CPU);
    dispatch_with_bf16(dtype, [&]<class T>() {
        T* p = host.data<T>();
        for (int64_t i = 0; i < host.numel(); ++i) p[i] = static_cast<T>(draw());
    });
    return host.to(device);
}
}  // namespace

Tensor rand(const Shape& shape, Generator& gen, DType dtype, Device device) {
    return draw_on_host(shape, dtype, device, [&] { return gen.uniform(); });
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
    return draw_on_host(shape, dtype, device, [&] { return gen.normal(); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen, Device device) {
    return draw_on_host(shape, DType::i64, device, [&] { return gen.randint(low, high); });
}

}  // namespace gg
