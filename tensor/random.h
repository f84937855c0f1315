// random.h — a seeded generator whose streams are the same on every machine.
//
// xoshiro256** for bits (fully specified, unlike std:: distributions), Box–Muller for
// normals. Random tensors are drawn on the host and then moved to their device, so a
// seed gives the same numbers on the CPU and on CUDA.
#pragma once
#include <array>
#include <cstdint>

#include "tensor/tensor.h"

namespace gg {

class Generator {
public:
    explicit Generator(uint64_t seed = 0) { manual_seed(seed); }
    void manual_seed(uint64_t seed);
    uint64_t next_u64();
    double uniform();                  // [0, 1)
    double normal();                   // N(0, 1)
    int64_t randint(int64_t low, int64_t high);  // [low, high)

    // The whole state, so that checkpoints can resume a stream exactly. All zeros is the
    // one state xoshiro cannot leave (it would draw zeros forever): set_state refuses it.
    std::array<uint64_t, 4> state() const { return s_; }
    void set_state(const std::array<uint64_t, 4>& s);

private:
    std::array<uint64_t, 4> s_{};
};

// The generator used when none is passed; `manual_seed` reseeds it.
Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor rand(const Shape& shape, Generator& gen = default_generator(), DType dtype = DType::f32,
            Device device = Device::CPU);  // U[0, 1)
Tensor randn(const Shape& shape, Generator& gen = default_generator(), DType dtype = DType::f32,
             Device device = Device::CPU);  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen = default_generator(),
               Device device = Device::CPU);  // int64 in [low, high)

}  // namespace gg
