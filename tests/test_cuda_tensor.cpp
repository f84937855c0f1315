// test_cuda_tensor.cpp — tensors on Device::CUDA: moving to and from the device, reading
// values back, element-wise ops, mixed-device errors, modules and checkpoints, and the
// caching allocator seen from tensors, in-place writes that autograd catches. Runs on the
// table of tests/cuda_table.h.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "gatedgrad.h"
#include "cuda/cuda.h"
#include "cuda/runtime.h"
#include "tests/cuda_table.h"

using namespace gg;

namespace {

const Device kCuda = Device::CUDA;

// Makes sure Device::CUDA has a table before a case uses it.
struct UsesCuda {
    UsesCuda() { test::cuda_backend(); }
};

}  // namespace

TEST_CASE_FIXTURE(UsesCuda, "to(CUDA) and back keeps values, shape and dtype") {
    const Tensor f = from_vector(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 7.f, -0.5f}, {2, 3});
    const Tensor d = from_vector(std::vector<double>{1e-300, -2.5, 3.0}, {3});
    const Tensor i = from_vector(std::vector<int64_t>{-4, 0, 1LL << 40}, {3, 1});
    for (const Tensor& host : {f, d, i}) {
        const Tensor on_device = host.to(kCuda);
        CHECK(on_device.device() == kCuda);
        CHECK(on_device.shape() == host.shape());
        CHECK(on_device.dtype() == host.dtype());
        const Tensor back = on_device.to(Device::CPU);
        CHECK(back.device() == Device::CPU);
        CHECK(back.to_vector<double>() == host.to_vector<double>());
        CHECK(on_device.to_vector<double>() == host.to_vector<double>());  // read straight from the device
    }
    // A transposed view goes over as its values in row-major order.
    const Tensor t = f.t();
    CHECK(t.to(kCuda).to_vector<float>() == t.to_vector<float>());
    CHECK(t.to(kCuda).to(Device::CPU).is_contiguous());
    // A device tensor viewed with strides reads back the same as on the CPU.
    CHECK(f.to(kCuda).t().to_vector<float>() == t.to_vector<float>());
    CHECK(f.to(kCuda).narrow(1, 1, 2).to_vector<float>() == f.narrow(1, 1, 2).to_vector<float>());
    // Empty tensors move too.
    const Tensor empty = zeros({0, 4}).to(kCuda);
    CHECK(empty.numel() == 0);
    CHECK(empty.to(Device::CPU).shape() == Shape{0, 4});
}

TEST_CASE_FIXTURE(UsesCuda, "item, creation on the device, printing") {
    CHECK(scalar(2.5, DType::f64, kCuda).item() == 2.5);
    CHECK(full({2, 2}, 3, DType::i64, kCuda).to_vector<int64_t>() == std::vector<int64_t>{3, 3, 3, 3});
    CHECK(arange(0, 2, 0.5, DType::f32, kCuda).to_vector<float>() == std::vector<float>{0, 0.5f, 1, 1.5f});
    std::ostringstream os;
    os << from_vector(std::vector<float>{1, 2}, {2}, kCuda);
    CHECK(os.str() == "tensor([   1.0000,    2.0000], shape=(2), dtype=float32, device=cuda)");
    CHECK(describe(zeros({2, 3}, DType::f32, kCuda)) == "(2,3) float32 cuda");
}

TEST_CASE_FIXTURE(UsesCuda, "element-wise ops on device tensors match the CPU") {
    const Tensor a = from_vector(std::vector<float>{-1.5f, 0.f, 2.f, 0.25f, -3.f, 4.f}, {2, 3});
    const Tensor b = from_vector(std::vector<float>{0.5f, -2.f, 2.f}, {3});  // broadcast over rows
    const Tensor ga = a.to(kCuda), gb = b.to(kCuda);
    CHECK((ga + gb).to_vector<float>() == (a + b).to_vector<float>());
    CHECK((ga * gb - ga / gb).to_vector<float>() == (a * b - a / b).to_vector<float>());
    CHECK(sigmoid(ga).to_vector<float>() == sigmoid(a).to_vector<float>());
    CHECK(gelu(ga).to_vector<float>() == gelu(a).to_vector<float>());
    CHECK(pow(ga, 2.0).to_vector<float>() == pow(a, 2.0).to_vector<float>());
    CHECK(gt(ga, gb).to_vector<float>() == gt(a, b).to_vector<float>());
    CHECK(maximum(ga.t(), ga.t()).to_vector<float>() == a.t().to_vector<float>());
    CHECK(where(gt(ga, gb), ga, gb).to_vector<float>() == where(gt(a, b), a, b).to_vector<float>());
    CHECK((ga + 1.0).to_vector<float>() == (a + 1.0).to_vector<float>());
    CHECK(ga.to(DType::f64).to(DType::i64).to_vector<int64_t>() ==
          a.to(DType::f64).to(DType::i64).to_vector<int64_t>());
}

TEST_CASE_FIXTURE(UsesCuda, "RoPE rotates a device tensor with tables on its device") {
    // Its cos/sin tables are computed on the host: they must follow x to the device.
    manual_seed(3);
    const Tensor x = randn({1, 2, 5, 8});  // (B, H, T, D)
    const nn::RoPE rope(8);
    const Tensor on_device = rope.forward(x.to(kCuda), 3);
    CHECK(on_device.device() == kCuda);
    // Close, not bitwise: a GPU fuses x·cos − y·sin into one multiply-add (one rounding fewer).
    const std::vector<float> got = on_device.to_vector<float>(), want = rope.forward(x, 3).to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}

TEST_CASE_FIXTURE(UsesCuda, "in-place writes cross devices: copy_ from the host, fill_") {
    NoGradGuard no_grad;
    const Tensor dst = zeros({2, 3}, DType::f32, kCuda);
    const Tensor src = from_vector(std::vector<double>{1, 2, 3}, {3});  // other device, other dtype, broadcast
    dst.copy_(src);
    CHECK(dst.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
    dst.narrow(0, 1, 1).fill_(-1);
    CHECK(dst.to_vector<float>() == std::vector<float>{1, 2, 3, -1, -1, -1});
    const Tensor host = zeros({3});
    host.copy_(dst.select(0, 0));
    CHECK(host.to_vector<float>() == std::vector<float>{1, 2, 3});
}

TEST_CASE_FIXTURE(UsesCuda, "an in-place write into a device tensor saved for backward makes backward throw") {
    // The version counter lives on the Storage, on the host: no device memory is read to check it.
    const auto saved_by = [](const char* op) {
        return doctest::Contains(doctest::String("a tensor saved by '") + op + "' was modified in place");
    };
    const auto leaf = [](std::vector<float> values) {
        const auto n = static_cast<int64_t>(values.size());
        return from_vector(values, {n}).to(kCuda).requires_grad_();
    };
    SUBCASE("copy_ from the host into an operand of mul") {
        const Tensor a = leaf({1, 2}), b = leaf({3, 4});
        const Tensor y = a * b;
        {
            NoGradGuard no_grad;
            b.copy_(from_vector(std::vector<float>{5, 6}, {2}));
        }
        CHECK_THROWS_WITH_AS(y.sum().backward(), saved_by("mul"), std::logic_error);
    }
    SUBCASE("fill_ of the fused RMSNorm's weight") {
        const Tensor x = leaf({1, 2, 3, 4}), w = leaf({1, 1, 1, 1});
        const Tensor y = rms_norm(x.view({1, 4}), w, 1e-5);
        {
            NoGradGuard no_grad;
            w.fill_(2);
        }
        CHECK_THROWS_WITH_AS(y.sum().backward(), saved_by("rms_norm"), std::logic_error);
    }
    SUBCASE("an optimiser step on the device, and a checkpoint load into the device") {
        manual_seed(3);
        nn::Linear layer(3, 2);
        layer.to(kCuda);
        const Tensor x = randn({4, 3}).to(kCuda);
        nn::AdamW opt(layer.parameters(), 0.1);
        layer.forward(x).sum().backward();
        const Tensor loss = layer.forward(x).sum();
        opt.step();  // writes the weight that loss's matmul saved
        CHECK_THROWS_WITH_AS(loss.backward(), saved_by("matmul"), std::logic_error);

        const std::string path = (std::filesystem::temp_directory_path() / "gg_test_cuda_version.safetensors").string();
        nn::save(layer, path);
        const Tensor again = layer.forward(x).sum();
        nn::load(layer, path);
        CHECK_THROWS_WITH_AS(again.backward(), saved_by("matmul"), std::logic_error);
        std::remove(path.c_str());
    }
}

TEST_CASE_FIXTURE(UsesCuda, "a checkpoint with a NaN is refused before a device module changes") {
    const std::string path = (std::filesystem::temp_directory_path() / "gg_test_cuda_nan.safetensors").string();
    manual_seed(4);
    nn::Linear layer(2, 2);
    layer.to(kCuda);
    const std::vector<float> before = layer.weight.to_vector<float>();
    nn::save_tensors(path, {{"weight", full({2, 2}, NAN)}, {"bias", zeros({2})}});
    CHECK_THROWS_WITH_AS(nn::load(layer, path), doctest::Contains("tensor 'weight' holds a NaN"), std::runtime_error);
    CHECK(layer.weight.to_vector<float>() == before);
    CHECK(layer.weight.device() == kCuda);
    std::remove(path.c_str());
}

TEST_CASE_FIXTURE(UsesCuda, "matmul over an empty inner dimension is zeros on the device too") {
    const Tensor y = matmul(zeros({2, 0}, DType::f32, kCuda), zeros({0, 4}, DType::f32, kCuda));
    CHECK(y.device() == kCuda);
    CHECK(y.shape() == Shape{2, 4});
    CHECK(y.to_vector<float>() == std::vector<float>(8, 0.f));
}

TEST_CASE_FIXTURE(UsesCuda, "mixed-device operands are an error that names both devices, never a copy") {
    const Tensor c = ones({2, 2}), g = ones({2, 2}, DType::f32, kCuda);
    CHECK_THROWS_WITH_AS(c + g,
                         "add: device mismatch, (2,2) float32 on cpu vs (2,2) float32 on cuda; move one with "
                         ".to(device)",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(matmul(c, g), "matmul: (2,2) @ (2,2): device mismatch, cpu vs cuda", std::invalid_argument);
    CHECK_THROWS_WITH_AS(where(gt(c, c), g, g), "where: the condition is on cpu but the values are on cuda",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(cross_entropy(g, zeros({2}, DType::i64)), doctest::Contains("on the same device"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(embedding(g, zeros({2}, DType::i64)), doctest::Contains("on the same device"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(g.data<float>(), "data: the tensor is on cuda; move it to the cpu first", std::logic_error);
}

TEST_CASE_FIXTURE(UsesCuda, "Module::to moves every parameter and buffer, and back") {
    manual_seed(0);
    nn::Linear layer(3, 2);
    const std::vector<float> w = layer.weight.to_vector<float>(), b = layer.bias.to_vector<float>();
    layer.to(kCuda);
    for (const Tensor& p : layer.parameters()) {
        CHECK(p.device() == kCuda);
        CHECK(p.requires_grad());
    }
    CHECK(layer.weight.to_vector<float>() == w);
    layer.to(Device::CPU);
    CHECK(layer.bias.device() == Device::CPU);
    CHECK(layer.bias.to_vector<float>() == b);
}

TEST_CASE_FIXTURE(UsesCuda, "checkpoints save from and load to either device") {
    const std::string path = (std::filesystem::temp_directory_path() / "gg_test_cuda_tensor.safetensors").string();
    manual_seed(1);
    nn::Linear saved(4, 3);
    saved.to(kCuda);
    nn::save(saved, path, {{"note", "saved from cuda"}});

    manual_seed(2);
    nn::Linear on_cpu(4, 3), on_cuda(4, 3);
    on_cuda.to(kCuda);
    CHECK(nn::load(on_cpu, path).at("note") == "saved from cuda");
    nn::load(on_cuda, path);
    CHECK(on_cuda.weight.device() == kCuda);  // loaded in place: the same device tensors
    for (const nn::Linear* m : {&on_cpu, &on_cuda}) {
        CHECK(m->weight.to_vector<float>() == saved.weight.to_vector<float>());
        CHECK(m->bias.to_vector<float>() == saved.bias.to_vector<float>());
    }

    const nn::NamedTensors tensors{{"ids", arange(5, DType::i64, kCuda)},
                                   {"x", from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, kCuda).t()}};
    nn::save_tensors(path, tensors);
    const nn::NamedTensors loaded = nn::load_tensors(path);
    CHECK(loaded[0].second.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(loaded[1].second.to_vector<double>() == std::vector<double>{1, 3, 2, 4});
    std::remove(path.c_str());
}

TEST_CASE_FIXTURE(UsesCuda, "a freed tensor's block is reused by the next tensor of its size class") {
    // The statistics of the build behind Device::CUDA (the emulated one behind this suite's own table).
    const auto stats = [] { return cuda::selection().table ? cuda::memory_stats() : cuda::emulated::memory_stats(); };
    const size_t in_use = stats().bytes_in_use;
    { const Tensor t = zeros({1000}, DType::f32, kCuda); }
    const cuda::MemoryStats after_free = stats();
    CHECK(after_free.bytes_in_use == in_use);
    { const Tensor t = zeros({900}, DType::f32, kCuda); }  // 3600 bytes: the same 4096-byte class
    // With GATEDGRAD_CUDA_CACHE=0 (under a memory checker) every tensor is a new block.
    const size_t misses = caching_enabled_by_environment("GATEDGRAD_CUDA_CACHE") ? 0 : 1;
    CHECK(stats().device_allocations == after_free.device_allocations + misses);
}
