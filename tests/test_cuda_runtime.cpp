// test_cuda_runtime.cpp — the CUDA runtime that needs no GPU to test: the caching allocator
// (over counting fakes), the rule that picks what serves Device::CUDA (over fake tables),
// the registry, the emulated build's memory and copies, and device errors at launches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "cuda/build_config.h"
#include "tensor/caching_allocator.h"
#include "cuda/cuda.h"
#include "cuda/device_error.h"
#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "nn/optim/optimizer.h"
#include "tensor/tensor.h"

using gg::cuda::CachingAllocator;

namespace {

// ---- a raw allocator that counts, and can run out of memory ---------------------------------

struct FakeDevice {
    size_t capacity = SIZE_MAX;  // bytes it can hand out at once
    size_t used = 0;
    int allocations = 0, frees = 0;
    std::vector<size_t> sizes;   // of each raw allocation, in order
    std::map<void*, size_t> live;  // block → size
};
FakeDevice fake;

void* fake_allocate(size_t nbytes) {
    if (fake.used + nbytes > fake.capacity) return nullptr;
    void* p = std::malloc(nbytes);
    fake.used += nbytes;
    ++fake.allocations;
    fake.sizes.push_back(nbytes);
    fake.live.emplace(p, nbytes);
    return p;
}
// What it frees it must have handed out.
void fake_free(void* p) {
    const auto it = fake.live.find(p);
    REQUIRE(it != fake.live.end());
    fake.used -= it->second;
    fake.live.erase(it);
    ++fake.frees;
    std::free(p);
}

// Resets the fake; each test case starts with an empty device.
struct FreshDevice {
    FreshDevice() { fake = FakeDevice{}; }
};

}  // namespace

TEST_CASE("size classes: multiples of 512 bytes up to 1 MiB, then quarter steps of a power of two") {
    CHECK(CachingAllocator::size_class(0) == 512);
    CHECK(CachingAllocator::size_class(1) == 512);
    CHECK(CachingAllocator::size_class(512) == 512);
    CHECK(CachingAllocator::size_class(513) == 1024);
    CHECK(CachingAllocator::size_class(1 << 20) == 1 << 20);
    CHECK(CachingAllocator::size_class((1 << 20) + 1) == (1 << 20) + (1 << 18));
    CHECK(CachingAllocator::size_class(3 << 20) == 3 << 20);
    CHECK(CachingAllocator::size_class((5 << 20) + 7) == 6 << 20);
    for (size_t n : {size_t(1), size_t(1000), size_t(777777), size_t(3) << 20, (size_t(1) << 33) + 12345}) {
        const size_t c = CachingAllocator::size_class(n);
        CHECK(c >= n);
        CHECK(double(c) <= std::max(1.25 * double(n), 512.0));  // at most a quarter wasted past the first class
    }
}

TEST_CASE("a freed block is handed out again to a request of its size class") {
    FreshDevice device;
    CachingAllocator a(fake_allocate, fake_free, true);
    void* p = a.allocate(1000);
    CHECK(a.stats().bytes_in_use == 1024);
    a.deallocate(p);
    CHECK(a.stats().bytes_in_use == 0);
    CHECK(a.stats().bytes_cached == 1024);
    CHECK(fake.frees == 0);

    void* q = a.allocate(700);  // also the 1024-byte class
    CHECK(q == p);
    CHECK(a.stats().device_allocations == 1);
    CHECK(a.stats().bytes_cached == 0);

    void* r = a.allocate(2000);  // another class: a new block
    CHECK(r != p);
    CHECK(a.stats().device_allocations == 2);
    CHECK(a.stats().bytes_in_use == 1024 + 2048);
    CHECK(a.stats().peak_bytes_in_use == 1024 + 2048);
    a.deallocate(q);
    a.deallocate(r);
    CHECK(a.stats().peak_bytes_in_use == 1024 + 2048);
    CHECK(fake.sizes == std::vector<size_t>{1024, 2048});
}

TEST_CASE("empty_cache returns cached blocks to the device and keeps blocks in use") {
    FreshDevice device;
    CachingAllocator a(fake_allocate, fake_free, true);
    void* kept = a.allocate(100);
    void* freed = a.allocate(5000);
    a.deallocate(freed);
    a.empty_cache();
    CHECK(fake.frees == 1);
    CHECK(fake.live.count(kept) == 1);
    CHECK(a.stats().bytes_cached == 0);
    CHECK(a.stats().bytes_in_use == 512);
    a.deallocate(kept);
}

TEST_CASE("a bounded cache keeps freed blocks only up to its bound and makes room before a large miss") {
    FreshDevice device;
    CachingAllocator a(fake_allocate, fake_free, true, 4096);
    void* p = a.allocate(3000);   // 3072 bytes
    void* q = a.allocate(1024);
    void* r = a.allocate(2048);
    a.deallocate(p);  // 3072 cached
    a.deallocate(q);  // 4096: exactly the bound, still cached
    CHECK(fake.frees == 0);
    a.deallocate(r);  // would make 6144: freed
    CHECK(fake.frees == 1);
    CHECK(fake.live.count(r) == 0);
    CHECK(a.stats().bytes_cached == 4096);
    // What was kept is handed out again without asking the device.
    const size_t before = a.stats().device_allocations;
    void* again = a.allocate(3000);
    CHECK(again == p);
    CHECK(a.stats().device_allocations == before);
    a.deallocate(again);
    // A miss that would take cached and new bytes past the bound returns the cache first:
    // then the device holds only the new block.
    void* fresh = a.allocate(1536);  // 1536 + 4096 > 4096
    CHECK(a.stats().bytes_cached == 0);
    CHECK(fake.frees == 3);
    CHECK(fake.used == 1536);
    // A block larger than the whole bound is never kept.
    void* big = a.allocate(8192);
    a.deallocate(big);
    CHECK(fake.frees == 4);
    a.deallocate(fresh);
    CHECK(a.stats().bytes_cached == 1536);
}

TEST_CASE("out of memory: the cache is emptied and the request tried again, then an error that says how much") {
    FreshDevice device;
    fake.capacity = 4096;
    CachingAllocator a(fake_allocate, fake_free, true);
    void* p = a.allocate(3000);  // 3072 bytes of the 4096
    a.deallocate(p);             // cached: the device still has only 1024 free
    void* q = a.allocate(2048);  // misses, fails, empties the cache, succeeds
    CHECK(q != nullptr);
    CHECK(fake.frees == 1);
    CHECK(a.stats().bytes_cached == 0);
    CHECK_THROWS_WITH_AS(a.allocate(4096), "cuda: out of memory: 4096 bytes requested, 2048 in use", std::bad_alloc);
    a.deallocate(q);
}

TEST_CASE("with caching off every block goes straight back, at its exact size") {
    FreshDevice device;
    CachingAllocator a(fake_allocate, fake_free, false);
    void* p = a.allocate(1000);
    void* z1 = a.allocate(0);
    void* z2 = a.allocate(0);
    CHECK(z1 != z2);  // even empty tensors have their own address
    CHECK(fake.sizes == std::vector<size_t>{1000, 1, 1});
    a.deallocate(p);
    CHECK(fake.frees == 1);
    CHECK(a.stats().bytes_cached == 0);
    void* q = a.allocate(1000);
    CHECK(a.stats().device_allocations == 4);
    a.deallocate(q);
    a.deallocate(z1);
    a.deallocate(z2);
    CHECK(fake.live.empty());
}

TEST_CASE("the allocator refuses a pointer it did not hand out, and frees everything when destroyed") {
    FreshDevice device;
    {
        CachingAllocator a(fake_allocate, fake_free, true);
        int on_the_stack = 0;
        CHECK_THROWS_WITH_AS(a.deallocate(&on_the_stack), "cuda allocator: freeing a block it did not hand out",
                             std::invalid_argument);
        void* p = a.allocate(10);
        a.allocate(20000);
        a.deallocate(p);
    }
    CHECK(fake.allocations == 2);
    CHECK(fake.live.empty());
}

TEST_CASE("GATEDGRAD_CUDA_CACHE=0 turns caching off; anything else leaves it on") {
    const char* saved = std::getenv("GATEDGRAD_CUDA_CACHE");
    const std::string before = saved ? saved : "";
    ::unsetenv("GATEDGRAD_CUDA_CACHE");
    CHECK(gg::caching_enabled_by_environment("GATEDGRAD_CUDA_CACHE"));
    ::setenv("GATEDGRAD_CUDA_CACHE", "0", 1);
    CHECK_FALSE(gg::caching_enabled_by_environment("GATEDGRAD_CUDA_CACHE"));
    ::setenv("GATEDGRAD_CUDA_CACHE", "1", 1);
    CHECK(gg::caching_enabled_by_environment("GATEDGRAD_CUDA_CACHE"));
    if (saved)
        ::setenv("GATEDGRAD_CUDA_CACHE", before.c_str(), 1);
    else
        ::unsetenv("GATEDGRAD_CUDA_CACHE");
}

// ---- which table serves Device::CUDA ------------------------------------------------------

namespace {

// Tables that are only names: the rule hands out addresses and never calls an entry.
gg::Backend named(const char* name) {
    gg::Backend table{};
    table.name = name;
    return table;
}
const gg::Backend emulated_table = named("fake emulated");
const gg::Backend gpu_table = named("fake gpu");
int probes = 0;
std::string device_present() { return ++probes, ""; }
std::string old_driver() {
    return ++probes, "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
                     "(cudaErrorInsufficientDriver)";
}

}  // namespace

TEST_CASE("selection: GATEDGRAD_CUDA=emulator picks the emulated table without asking the GPU") {
    using gg::cuda::Mode;
    probes = 0;
    const gg::cuda::BuiltIn everything{&emulated_table, &gpu_table, device_present};
    const auto s = gg::cuda::select("emulator", everything);
    CHECK(s.mode == Mode::emulator);
    CHECK(s.table == &emulated_table);
    CHECK(s.error.empty());
    CHECK(probes == 0);

    const auto missing = gg::cuda::select("emulator", {nullptr, nullptr, nullptr});
    CHECK(missing.mode == Mode::none);
    CHECK(missing.table == nullptr);
    CHECK(missing.error ==
          "no CUDA backend: GATEDGRAD_CUDA=emulator, but this library was built without the CUDA kernel table "
          "(tools/build builds it; meson: -Dkernel_table=true)");
}

TEST_CASE("selection: unset, the GPU table when a device answers, else why not") {
    using gg::cuda::Mode;
    const auto gpu = gg::cuda::select(nullptr, {&emulated_table, &gpu_table, device_present});
    CHECK(gpu.mode == Mode::gpu);
    CHECK(gpu.table == &gpu_table);
    CHECK(gg::cuda::select("", {&emulated_table, &gpu_table, device_present}).table == &gpu_table);

    // Never the emulator unless asked for: a program that wanted the GPU learns it has none.
    const auto no_driver = gg::cuda::select(nullptr, {&emulated_table, &gpu_table, old_driver});
    CHECK(no_driver.mode == Mode::none);
    CHECK(no_driver.table == nullptr);
    CHECK(no_driver.error ==
          "no CUDA device: cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
          "(cudaErrorInsufficientDriver); set GATEDGRAD_CUDA=emulator to run CUDA kernels on the CPU emulator");

    const auto no_nvcc = gg::cuda::select(nullptr, {&emulated_table, nullptr, nullptr});
    CHECK(no_nvcc.error ==
          "no CUDA device: gatedgrad was built without nvcc; set GATEDGRAD_CUDA=emulator to run CUDA kernels on "
          "the CPU emulator");

    const auto no_table = gg::cuda::select(nullptr, {nullptr, nullptr, device_present});
    CHECK(no_table.table == nullptr);
    CHECK(no_table.error.starts_with("no CUDA backend: a GPU is present, but this library was built without"));
}

TEST_CASE("selection: another value of GATEDGRAD_CUDA is an error that names the choices") {
    const auto s = gg::cuda::select("gpu0", {&emulated_table, &gpu_table, device_present});
    CHECK(s.table == nullptr);
    CHECK(s.error ==
          "no CUDA device: GATEDGRAD_CUDA=gpu0 is not a choice; leave it unset for the GPU, or set "
          "GATEDGRAD_CUDA=emulator");
}

TEST_CASE("the registry serves Device::CUDA with this process's selection, or throws its one-line error") {
    const gg::cuda::Selection& s = gg::cuda::selection();
    MESSAGE("Device::CUDA here: " << (s.table ? s.table->name : s.error));
    CHECK((s.table != nullptr) == gg::device_available(gg::Device::CUDA));
    CHECK((s.mode == gg::cuda::Mode::none) == (s.table == nullptr));
    if (s.table) {
        CHECK(&gg::backend(gg::Device::CUDA) == s.table);
        CHECK(gg::cuda::device_name() != "none");
    } else {
        CHECK(s.error.starts_with("no CUDA"));
        CHECK(s.error.find('\n') == std::string::npos);
        CHECK_THROWS_WITH_AS(gg::backend(gg::Device::CUDA), s.error.c_str(), std::runtime_error);
        CHECK_THROWS_WITH_AS(gg::Tensor::empty({2}, gg::DType::f32, gg::Device::CUDA), s.error.c_str(),
                             std::runtime_error);
        CHECK_THROWS_WITH_AS(gg::cuda::memory_stats(), s.error.c_str(), std::runtime_error);
        CHECK(gg::cuda::device_name() == "none");
    }
    CHECK(gg::device_available(gg::Device::CPU));
}

TEST_CASE("a registered table serves Device::CUDA until it is taken back") {
    const bool before = gg::device_available(gg::Device::CUDA);
    gg::register_backend(gg::Device::CUDA, &gpu_table);
    CHECK(gg::device_available(gg::Device::CUDA));
    CHECK(std::string(gg::backend(gg::Device::CUDA).name) == "fake gpu");
    gg::register_backend(gg::Device::CUDA, nullptr);
    CHECK(gg::device_available(gg::Device::CUDA) == before);
}

namespace {
// A provider whose device comes and goes, and counts how often it is asked for its table.
bool fake_device_present = false;
int provider_calls = 0;
const gg::Backend* fake_provider_table() {
    ++provider_calls;
    return fake_device_present ? &gpu_table : nullptr;
}
std::string fake_provider_why() { return "no fake device: unplugged"; }
}  // namespace

TEST_CASE("a device's provider is asked on use, says why its device is missing, and cuda/ registers its own") {
    gg::register_backend_provider(gg::Device::CUDA, fake_provider_table, fake_provider_why);
    CHECK(provider_calls == 0);  // registering asks nothing
    CHECK_FALSE(gg::device_available(gg::Device::CUDA));
    CHECK_THROWS_WITH_AS(gg::backend(gg::Device::CUDA), "no fake device: unplugged", std::runtime_error);
    fake_device_present = true;
    CHECK(std::string(gg::backend(gg::Device::CUDA).name) == "fake gpu");
    CHECK(provider_calls == 3);
    gg::cuda::register_cuda_backend();  // back to this process's selection
    CHECK(gg::device_available(gg::Device::CUDA) == (gg::cuda::selection().table != nullptr));
    CHECK(provider_calls == 3);
}

#if GG_CUDA_GPU
TEST_CASE("the GPU build's device query says why there is no device, or nothing") {
    // On a machine without a driver this is cudaErrorInsufficientDriver, never a crash.
    const std::string why_not = gg::cuda::gpu::probe_devices();
    CHECK((why_not.empty() || why_not.starts_with("cudaGetDeviceCount")));
}
#endif

// ---- the emulated build's memory ----------------------------------------------------------

TEST_CASE("emulated memory: aligned blocks, copies both ways, counted by the allocator") {
    namespace emu = gg::cuda::emulated;
    const gg::cuda::MemoryStats before = emu::memory_stats();
    const std::vector<double> host{1.5, -2.0, 3.25};
    void* block = emu::allocate(host.size() * sizeof(double));
    CHECK(reinterpret_cast<uintptr_t>(block) % 256 == 0);  // as cudaMalloc's
    emu::from_host(block, host.data(), host.size() * sizeof(double));
    std::vector<double> back(3);
    emu::to_host(back.data(), block, back.size() * sizeof(double));
    CHECK(back == host);
    CHECK(emu::memory_stats().bytes_in_use >= before.bytes_in_use + 24);
    emu::deallocate(block, host.size() * sizeof(double));
    CHECK(emu::memory_stats().bytes_in_use == before.bytes_in_use);
    void* empty1 = emu::allocate(0);
    void* empty2 = emu::allocate(0);
    CHECK(empty1 != empty2);
    emu::deallocate(empty1, 0);
    emu::deallocate(empty2, 0);
    emu::synchronize();
}

// ---- device errors surface at the launch in the emulator --------------------------------

namespace {
// ids: (n) int64 → reports the first id outside [0, limit), as an embedding kernel would.
__global__ void check_ids(const int64_t* ids, int64_t n, int64_t limit, gg::cuda::DeviceError* error) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n && (ids[i] < 0 || ids[i] >= limit))
        gg::cuda::report_index_error(error, gg::cuda::kEmbedding, ids[i], i, limit);
}
}  // namespace

TEST_CASE("an index error a kernel reports is thrown by the emulated launch, then cleared") {
    const std::vector<int64_t> bad{0, 5, 300, 2}, good{0, 1, 2, 3};
    CHECK_THROWS_WITH_AS(gg::cuda::launch("check_ids", check_ids, dim3(1), dim3(32), 0, bad.data(), int64_t(4),
                                          int64_t(257), gg::cuda::emulated::device_error()),
                         "embedding: index 300 at position 2 is out of range [0, 257)", std::out_of_range);
    CHECK_NOTHROW(gg::cuda::launch("check_ids", check_ids, dim3(1), dim3(32), 0, good.data(), int64_t(4), int64_t(257),
                                   gg::cuda::emulated::device_error()));
    CHECK_NOTHROW(gg::cuda::emulated::synchronize());
}

// ---- counting launches --------------------------------------------------------------------

TEST_CASE("kernel_launches counts one per launch: an addition is one, attention one forward and two backward") {
    if (!gg::device_available(gg::Device::CUDA)) return;  // nothing serves Device::CUDA: nothing to count
    using gg::Tensor;
    const gg::Backend& table = gg::backend(gg::Device::CUDA);
    const auto launches_of = [](auto&& work) {
        const int64_t before = gg::cuda::kernel_launches();
        work();
        return gg::cuda::kernel_launches() - before;
    };
    const auto on_device = [](const gg::Shape& shape) { return gg::ones(shape, gg::DType::f32, gg::Device::CUDA); };
    const Tensor a = on_device({4, 8}), b = on_device({4, 8});
    CHECK(launches_of([&] { (void)(a + b); }) == 1);

    const int64_t B = 1, H = 2, T = 8, D = 32;
    const gg::AttentionShape s{B, H, H, T, T, D, true, 0, 0.125};
    const Tensor q = on_device({B, H, T, D}), o = on_device({B, H, T, D}), lse = on_device({B, H, T}),
                 probs = on_device({B, H, T, T}), dq = on_device({B, H, T, D}), dk = on_device({B, H, T, D}),
                 dv = on_device({B, H, T, D});
    const gg::View none{nullptr, gg::DType::f32, 0, {}, {}};
    CHECK(launches_of([&] {
              table.attention_forward(s, o.view_desc(), lse.view_desc(), none, q.view_desc(), q.view_desc(),
                                      q.view_desc(), none);
          }) == 1);
    // The probabilities, when asked for, are a second kernel.
    CHECK(launches_of([&] {
              table.attention_forward(s, o.view_desc(), lse.view_desc(), probs.view_desc(), q.view_desc(),
                                      q.view_desc(), q.view_desc(), none);
          }) == 2);
    CHECK(launches_of([&] {
              table.attention_backward(s, dq.view_desc(), dk.view_desc(), dv.view_desc(), q.view_desc(),
                                       q.view_desc(), q.view_desc(), q.view_desc(), o.view_desc(), lse.view_desc(), gg::View{});
          }) == 2);
}

TEST_CASE("clip_grad_norm makes the same few launches for 3 parameters as for 300") {
    if (!gg::device_available(gg::Device::CUDA)) return;  // nothing serves Device::CUDA: nothing to count
    // The norm over the list (its accumulator's fill, the chunk sums, their total, the copy
    // that reads it back) and the scaling of the list: one launch each, however many
    // gradients there are.
    for (const int count : {3, 300}) {
        CAPTURE(count);
        std::vector<gg::Tensor> params;
        for (int i = 0; i < count; ++i) {
            params.push_back(gg::zeros({1 + i % 5}, gg::DType::f32, gg::Device::CUDA).requires_grad_());
            params.back().set_grad(gg::ones({1 + i % 5}, gg::DType::f32, gg::Device::CUDA));
        }
        const int64_t before = gg::cuda::kernel_launches();
        const double norm = gg::nn::clip_grad_norm(params, 0.5);
        CHECK(gg::cuda::kernel_launches() - before == 5);
        CHECK(norm > 0.5);  // so the scaling ran: every gradient is now 0.5 / norm
        CHECK(params.back().grad().to(gg::Device::CPU).to_vector<float>().front() ==
              doctest::Approx(0.5 / norm).epsilon(1e-6));
    }
}
