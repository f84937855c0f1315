// test_cuda_elementwise.cpp — cuda/elementwise.cu against the CPU table: fill, arange, copy,
// unary, binary and where, in f32, f64 and int64, on shapes with odd sizes, empty dims, a
// scalar and 8 dims, over contiguous, transposed, broadcast and sliced operands; and the
// packed path of contiguous operands (cuda/packs.h): sizes around the pack width, a loop that
// goes round twice, and views one element off the alignment a pack needs.
//
// The kernels run through the table serving Device::CUDA (tests/cuda_table.h): the emulator
// here, a GPU under tools/gpu-check. Each operand's storage is filled on the host, the CPU
// runs on it, the device on a copy of it, and every element of the output's storage is
// compared (so elements a strided output must not touch are checked too): exactly for
// int64, to 1e-5 (f32) or 1e-12 (f64) relative for floats, NaN matching NaN.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/cuda_table.h"
#include "tensor/dtype.h"

using gg::BinaryOp;
using gg::DType;
using gg::Shape;
using gg::Strides;
using gg::UnaryOp;
using gg::View;

namespace {

const gg::Backend& cpu() { return gg::backend(gg::Device::CPU); }
const gg::Backend& cuda() { return gg::test::cuda_backend(); }

const Shape kShapes[] = {{}, {1}, {7}, {1000}, {3, 5}, {0, 5}, {4, 0, 3}, {2, 3, 17}, {5, 1, 7}, {33, 65},
                         {2, 1, 3, 1, 2, 2, 1, 3}};
const DType kDTypes[] = {DType::f32, DType::f64, DType::i64};

// How an operand of a given shape lies in its storage. shifted is contiguous from element 1
// of its storage: 4 or 8 bytes past the allocation's 256-byte boundary, too far for a pack.
enum class Layout { contiguous, transposed, broadcast, sliced, shifted };
const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::broadcast, Layout::sliced};

// One operand: its storage on the host (which the CPU reads and writes) and a copy of it on
// the device under test, both seen through the same shape and strides.
class Operand {
public:
    Operand(DType dtype, const Shape& shape, Layout layout) : dtype_(dtype), shape_(shape) {
        const int nd = int(shape.size());
        int64_t offset = 0;
        strides_ = gg::contiguous_strides(shape);
        if (layout == Layout::transposed) {  // stored with the dims in reverse order
            for (int d = 0, s = 1; d < nd; s *= int(shape[d]), ++d) strides_[d] = s;
        } else if (layout == Layout::broadcast) {  // every other dim expanded from size 1
            Shape stored = shape;
            for (int d = 0; d < nd; d += 2) stored[d] = 1;
            strides_ = gg::contiguous_strides(stored);
            for (int d = 0; d < nd; d += 2) strides_[d] = 0;
        } else if (layout == Layout::sliced && nd > 0) {  // every second element of a wider tensor, from element 3
            Shape wider = shape;
            wider[nd - 1] *= 2;
            strides_ = gg::contiguous_strides(wider);
            strides_[nd - 1] = 2;
            offset = 3;
        } else if (layout == Layout::shifted) {
            offset = 1;
        }
        offset_ = offset;
        int64_t extent = offset + 1;
        for (int d = 0; d < nd; ++d) extent += (shape[d] - 1) * strides_[d];
        if (gg::shape_numel(shape) == 0) extent = offset;
        count_ = extent;
        host_.resize(std::max<int64_t>(count_, 1) * gg::dtype_size(dtype));
        device_ = cuda().allocate(host_.size());
    }
    ~Operand() { cuda().deallocate(device_, host_.size()); }
    Operand(const Operand&) = delete;
    Operand& operator=(const Operand&) = delete;

    // Every storage element from values(rng) (as double, converted to the dtype); then to the device.
    template <class F>
    Operand& fill(F values) {
        gg::dispatch(dtype_, [&]<class T>() {
            for (int64_t i = 0; i < count_; ++i) reinterpret_cast<T*>(host_.data())[i] = static_cast<T>(values());
        });
        cuda().from_host(device_, host_.data(), host_.size());
        return *this;
    }

    View host() const { return view(const_cast<unsigned char*>(host_.data())); }
    View device() const { return view(device_); }

    // The device's storage equals the host's, element by element (see the header).
    void check_device_matches_host(const std::string& what) const {
        std::vector<unsigned char> from_device(host_.size());
        cuda().to_host(from_device.data(), device_, from_device.size());
        gg::dispatch(dtype_, [&]<class T>() {
            const T* expected = reinterpret_cast<const T*>(host_.data());
            const T* got = reinterpret_cast<const T*>(from_device.data());
            for (int64_t i = 0; i < count_; ++i)
                if (!close(expected[i], got[i])) {
                    FAIL_CHECK(what << ": storage element " << i << ": cpu " << expected[i] << ", cuda " << got[i]);
                    return;
                }
            CHECK(true);
        });
    }

    DType dtype() const { return dtype_; }

private:
    View view(void* base) const {
        return gg::make_view(static_cast<unsigned char*>(base) + offset_ * gg::dtype_size(dtype_), dtype_, shape_,
                             strides_);
    }
    template <class T>
    static bool close(T expected, T got) {
        if constexpr (std::is_integral_v<T>) {
            return expected == got;
        } else {
            if (std::isnan(expected) || std::isnan(got)) return std::isnan(expected) && std::isnan(got);
            if (expected == got) return true;  // infinities too
            const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
            return std::abs(double(expected) - double(got)) <= tol * std::max(1.0, std::abs(double(expected)));
        }
    }

    DType dtype_;
    Shape shape_;
    Strides strides_;
    int64_t offset_ = 0, count_ = 0;
    std::vector<unsigned char> host_;
    void* device_ = nullptr;
};

// Values: multiples of 1/8 in [-4, 4] (so comparisons meet ties and 0), or integers in [lo, hi].
struct Eighths {
    std::mt19937_64* rng;
    double operator()() const { return std::uniform_int_distribution<int>(-32, 32)(*rng) / 8.0; }
};
struct Integers {
    std::mt19937_64* rng;
    int lo, hi;
    double operator()() const { return std::uniform_int_distribution<int>(lo, hi)(*rng); }
};
const auto kSentinel = [] { return -777.0; };  // what an output holds before a kernel writes it

std::string label(const char* entry, DType dtype, const Shape& shape) {
    return std::string(entry) + " " + gg::dtype_name(dtype) + " " + gg::shape_str(shape);
}

}  // namespace

TEST_CASE("fill and arange") {
    for (DType dtype : kDTypes)
        for (const Shape& shape : kShapes) {
            Operand out(dtype, shape, Layout::contiguous);
            out.fill(kSentinel);
            cpu().fill(out.host(), 2.75);
            cuda().fill(out.device(), 2.75);
            out.check_device_matches_host(label("fill", dtype, shape));

            Operand range(dtype, {gg::shape_numel(shape)}, Layout::contiguous);
            range.fill(kSentinel);
            cpu().arange(range.host(), -1.5, 0.25);
            cuda().arange(range.device(), -1.5, 0.25);
            range.check_device_matches_host(label("arange", dtype, shape));
        }
}

TEST_CASE("copy between any two dtypes and any two layouts") {
    std::mt19937_64 rng(1);
    // A broadcast output is no output: two of its elements would be one location.
    const Layout out_layouts[] = {Layout::contiguous, Layout::transposed, Layout::sliced};
    int s = 0;
    for (const Shape& shape : kShapes) {
        ++s;
        for (DType to : kDTypes)
            for (DType from : kDTypes) {
                Operand in(from, shape, kLayouts[s % 4]);
                in.fill(Eighths{&rng});
                Operand out(to, shape, out_layouts[s % 3]);
                out.fill(kSentinel);
                cpu().copy(out.host(), in.host());
                cuda().copy(out.device(), in.device());
                out.check_device_matches_host(label("copy", to, shape) + " from " + gg::dtype_name(from));
            }
    }
}

TEST_CASE("every unary op") {
    const UnaryOp ops[] = {UnaryOp::neg,  UnaryOp::exp,  UnaryOp::log,     UnaryOp::sqrt, UnaryOp::rsqrt,
                           UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::relu, UnaryOp::silu, UnaryOp::gelu,
                           UnaryOp::erf,  UnaryOp::abs,  UnaryOp::pow};
    std::mt19937_64 rng(2);
    for (UnaryOp op : ops)
        for (double exponent : {3.0, 0.5}) {
            if (op != UnaryOp::pow && exponent != 3.0) continue;
            for (DType dtype : kDTypes) {
                int s = 0;
                for (const Shape& shape : kShapes) {
                    Operand in(dtype, shape, kLayouts[s++ % 4]);
                    // int64 keeps to values whose result is an integer the conversion can hold.
                    const bool signs = op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::relu;
                    if (dtype == DType::i64)
                        in.fill(Integers{&rng, signs ? -12 : 1, 12});
                    else
                        in.fill(Eighths{&rng});
                    Operand out(dtype, shape, Layout::contiguous);
                    out.fill(kSentinel);
                    cpu().unary(op, out.host(), in.host(), exponent);
                    cuda().unary(op, out.device(), in.device(), exponent);
                    out.check_device_matches_host(label("unary", dtype, shape) + " op " + std::to_string(int(op)) +
                                                  " exponent " + std::to_string(exponent));
                }
            }
        }
}

TEST_CASE("every binary op, over broadcast and strided operands") {
    const BinaryOp ops[] = {BinaryOp::add,     BinaryOp::sub, BinaryOp::mul, BinaryOp::div,
                            BinaryOp::maximum, BinaryOp::minimum, BinaryOp::eq, BinaryOp::ne,
                            BinaryOp::lt,      BinaryOp::le,  BinaryOp::gt,  BinaryOp::ge};
    std::mt19937_64 rng(3);
    for (BinaryOp op : ops)
        for (DType dtype : kDTypes) {
            int s = 0;
            for (const Shape& shape : kShapes) {
                Operand a(dtype, shape, kLayouts[s % 4]), b(dtype, shape, kLayouts[(s + 1) % 4]);
                ++s;
                if (dtype == DType::i64) {
                    a.fill(Integers{&rng, -20, 20});
                    b.fill(Integers{&rng, 1, 6});  // int64 division by zero is undefined
                } else {
                    a.fill(Eighths{&rng});
                    b.fill(Eighths{&rng});
                }
                Operand out(dtype, shape, Layout::contiguous);
                out.fill(kSentinel);
                cpu().binary(op, out.host(), a.host(), b.host());
                cuda().binary(op, out.device(), a.device(), b.device());
                out.check_device_matches_host(label("binary", dtype, shape) + " op " + std::to_string(int(op)));
            }
        }
}

TEST_CASE("where") {
    std::mt19937_64 rng(4);
    for (DType dtype : kDTypes) {
        int s = 0;
        for (const Shape& shape : kShapes) {
            Operand cond(dtype, shape, kLayouts[s % 4]), a(dtype, shape, kLayouts[(s + 1) % 4]),
                b(dtype, shape, kLayouts[(s + 2) % 4]);
            ++s;
            cond.fill(Integers{&rng, -1, 1});
            a.fill(Eighths{&rng});
            b.fill(Eighths{&rng});
            Operand out(dtype, shape, Layout::contiguous);
            out.fill(kSentinel);
            cpu().where(out.host(), cond.host(), a.host(), b.host());
            cuda().where(out.device(), cond.device(), a.device(), b.device());
            out.check_device_matches_host(label("where", dtype, shape));
        }
    }
}

TEST_CASE("8 dims that cannot merge, and more elements than the grid has threads") {
    std::mt19937_64 rng(5);
    // Transposed against broadcast: no two neighbouring dims walk as one for both operands.
    const Shape shape{2, 3, 2, 3, 2, 3, 2, 3};
    Operand a(DType::f32, shape, Layout::transposed), b(DType::f32, shape, Layout::broadcast);
    a.fill(Eighths{&rng});
    b.fill(Eighths{&rng});
    Operand out(DType::f32, shape, Layout::contiguous);
    out.fill(kSentinel);
    cpu().binary(BinaryOp::mul, out.host(), a.host(), b.host());
    cuda().binary(BinaryOp::mul, out.device(), a.device(), b.device());
    out.check_device_matches_host("binary mul over 8 dims");

    // 4096 blocks × 256 threads = 1048576: each thread's loop runs more than once.
    const Shape big{1100, 1000};
    Operand x(DType::f32, big, Layout::contiguous), y(DType::f32, big, Layout::sliced);
    x.fill(Eighths{&rng});
    y.fill(Eighths{&rng});
    Operand sum(DType::f32, big, Layout::contiguous);
    sum.fill(kSentinel);
    cpu().binary(BinaryOp::add, sum.host(), x.host(), y.host());
    cuda().binary(BinaryOp::add, sum.device(), x.device(), y.device());
    sum.check_device_matches_host("binary add over 1.1M elements, one operand strided");
}

TEST_CASE("contiguous operands in packs: sizes around the pack width, several blocks, misaligned views") {
    // A pack is 4 f32 or 2 f64/int64 elements (cuda/packs.h); the last n mod 4 (or 2) go one
    // to a thread. 3075 f32 are 769 packs over 4 blocks and 3 left over. Each operand in turn
    // starts one element into its storage, which must send the call to one element per access
    // (the emulator throws on a misaligned pack, as a GPU faults).
    const int64_t sizes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1025, 1026, 1027, 3075};
    std::mt19937_64 rng(7);
    for (DType dtype : kDTypes)
        for (const int64_t n : sizes)
            for (int shifted = -1; shifted < 4; ++shifted) {  // the operand shifted: out, then inputs; −1 none
                const auto layout = [&](int k) { return k == shifted ? Layout::shifted : Layout::contiguous; };
                const std::string what = label("", dtype, {n}) + " operand " + std::to_string(shifted) + " shifted";
                Operand out(dtype, {n}, layout(0)), a(dtype, {n}, layout(1)), b(dtype, {n}, layout(2)),
                    cond(dtype, {n}, layout(3));
                a.fill(Integers{&rng, -20, 20});
                b.fill(Integers{&rng, 1, 6});
                cond.fill(Integers{&rng, -1, 1});

                out.fill(kSentinel);
                cpu().arange(out.host(), -1.5, 0.25);
                cuda().arange(out.device(), -1.5, 0.25);
                out.check_device_matches_host("arange" + what);

                out.fill(kSentinel);
                cpu().unary(UnaryOp::neg, out.host(), a.host(), 0);
                cuda().unary(UnaryOp::neg, out.device(), a.device(), 0);
                out.check_device_matches_host("unary neg" + what);

                out.fill(kSentinel);
                cpu().binary(BinaryOp::sub, out.host(), a.host(), b.host());
                cuda().binary(BinaryOp::sub, out.device(), a.device(), b.device());
                out.check_device_matches_host("binary sub" + what);

                out.fill(kSentinel);
                cpu().where(out.host(), cond.host(), a.host(), b.host());
                cuda().where(out.device(), cond.device(), a.device(), b.device());
                out.check_device_matches_host("where" + what);

                // Into every dtype: f32 → f64 moves 2 elements a pack (the f64 side's 16 bytes).
                for (DType to : kDTypes) {
                    Operand converted(to, {n}, layout(0));
                    converted.fill(kSentinel);
                    cpu().copy(converted.host(), a.host());
                    cuda().copy(converted.device(), a.device());
                    converted.check_device_matches_host("copy to " + std::string(gg::dtype_name(to)) + what);
                }
            }
}

TEST_CASE("packs: a grid-stride loop that goes round twice") {
    // 4096 blocks × 256 threads × 4 floats = 4194304: the first 1000 threads take a second
    // pack, the first 3 a left-over element.
    const Shape shape{4 * 4096 * 256 + 4 * 1000 + 3};
    std::mt19937_64 rng(8);
    Operand a(DType::f32, shape, Layout::contiguous), b(DType::f32, shape, Layout::contiguous);
    a.fill(Eighths{&rng});
    b.fill(Eighths{&rng});
    Operand out(DType::f32, shape, Layout::contiguous);
    out.fill(kSentinel);
    cpu().binary(BinaryOp::mul, out.host(), a.host(), b.host());
    cuda().binary(BinaryOp::mul, out.device(), a.device(), b.device());
    out.check_device_matches_host("binary mul over 4.2M elements");
}

TEST_CASE("two runs give bitwise identical results") {
    std::mt19937_64 rng(6);
    const Shape shape{33, 65};
    Operand a(DType::f32, shape, Layout::transposed), b(DType::f32, shape, Layout::broadcast);
    a.fill(Eighths{&rng});
    b.fill(Eighths{&rng});
    Operand first(DType::f32, shape, Layout::contiguous), second(DType::f32, shape, Layout::contiguous);
    for (Operand* out : {&first, &second}) {
        out->fill(kSentinel);
        cuda().binary(BinaryOp::div, out->device(), a.device(), b.device());
        cuda().unary(UnaryOp::gelu, out->device(), out->device(), 0);
    }
    std::vector<float> r1(33 * 65), r2(33 * 65);
    cuda().to_host(r1.data(), first.device().data, r1.size() * sizeof(float));
    cuda().to_host(r2.data(), second.device().data, r2.size() * sizeof(float));
    CHECK(std::memcmp(r1.data(), r2.data(), r1.size() * sizeof(float)) == 0);
}
