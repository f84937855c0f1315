// Tutorial 12 — data parallelism: one training run on N processes.
//
// Build and run from the repository root (2 ranks, one thread each; --steps N for more):
//   tools/build tutorial_12_data_parallel
//   mpirun -np 2 -x OMP_NUM_THREADS=1 ./build/tutorials/tutorial_12_data_parallel
// (as root, Open MPI also wants --allow-run-as-root). Alone, without mpirun, it runs as 1 rank.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

namespace {

// Every gradient of the model, one after another, in float64.
std::vector<double> gradients(GatedTransformerLM& model) {
    std::vector<double> all;
    for (const Tensor& p : model.parameters()) {
        const std::vector<double> g = p.grad().to_vector<double>();
        all.insert(all.end(), g.begin(), g.end());
    }
    return all;
}

double norm(const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v * v;
    return std::sqrt(s);
}

// ‖a − b‖ / ‖b‖
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    return norm(d) / norm(b);
}

std::vector<double> weights(GatedTransformerLM& model) {
    std::vector<double> all;
    for (const Tensor& p : model.parameters()) {
        const std::vector<double> w = p.to_vector<double>();
        all.insert(all.end(), w.begin(), w.end());
    }
    return all;
}

// The one setting, --steps N (default 20); --help says so, and anything else is refused
// (exit 2) rather than ignored, so that a mistyped flag never runs the default silently.
int64_t steps_from(int argc, char** argv) {
    const char* usage = "usage: tutorial_12_data_parallel [--steps N]   (N from 1 to 100000, default 20; "
                        "run under mpirun -np 2 for 2 ranks)\n";
    if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
        std::printf("%s", usage);
        std::exit(0);
    }
    if (argc == 1) return 20;
    char* end = nullptr;
    const long long steps = argc == 3 && std::strcmp(argv[1], "--steps") == 0 ? std::strtoll(argv[2], &end, 10) : 0;
    if (argc != 3 || std::strcmp(argv[1], "--steps") != 0 || end == argv[2] || *end != '\0' || steps < 1 || steps > 100000) {
        std::string given;
        for (int i = 1; i < argc; ++i) given.append(i > 1 ? " " : "").append(argv[i]);
        std::fprintf(stderr, "tutorial_12_data_parallel: '%s' is not what it takes; %s", given.c_str(), usage);
        std::exit(2);
    }
    return steps;
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t steps = steps_from(argc, argv);
    // The processes mpirun started (none: this one alone). Rank 0 prints.
    const std::shared_ptr<dist::ProcessGroup> group = dist::launched_by_mpi() ? dist::init_mpi() : nullptr;
    const int rank = group ? group->rank() : 0, N = group ? group->world_size() : 1;
    const bool say = rank == 0;

    TrainConfig config = TrainConfig::preset("tiny");
    config.batch_size = 8, config.steps = steps, config.warmup = 0, config.world_size = N;
    config.eval_every = steps, config.log_every = std::max<int64_t>(1, steps / 4), config.probe_every = 0;
    const int64_t B = config.batch_size, T = config.seq_len;
    auto data = std::make_shared<TextDataset>(load_documents(config.data));

    // 1. The gradient of the mean loss over 2B sequences is the mean of the gradients over
    //    its two halves: the loss is a mean, and a derivative is linear.
    if (say) {
        manual_seed(1);
        GatedTransformerLM model(config.model);
        Generator gen(1);
        const Batch batch = data->train_batch(2 * B, T, gen);  // (2B, T)
        model.forward(batch.inputs, batch.targets).loss.backward();
        const std::vector<double> whole = gradients(model);
        std::vector<double> halves(whole.size(), 0.0);
        for (int64_t half = 0; half < 2; ++half) {
            model.zero_grad();
            const Tensor x = batch.inputs.narrow(0, half * B, B), y = batch.targets.narrow(0, half * B, B);  // (B, T)
            model.forward(x, y).loss.backward();
            const std::vector<double> g = gradients(model);
            for (size_t i = 0; i < g.size(); ++i) halves[i] += g[i] / 2;
        }
        std::printf("1. one batch of %lld sequences against its two halves of %lld (%zu gradient entries)\n",
                    (long long)(2 * B), (long long)B, whole.size());
        std::printf("   gradient of the mean loss over all %lld:  norm %.6f\n", (long long)(2 * B), norm(whole));
        std::printf("   mean of the two halves' gradients:    norm %.6f\n", norm(halves));
        std::printf("   relative difference %.0e: float32 rounding, the sums are added in another order\n",
                    relative_difference(halves, whole));
    }

    // 2. An all-reduce: every rank gives a vector and gets back the sum of all of them.
    const Tensor x = from_vector(std::vector<double>{double(rank + 1), 10.0 * (rank + 1)}, {2});
    if (group) group->all_reduce(x, dist::ReduceOp::sum);
    if (say) {
        std::printf("\n2. all_reduce(sum) on %d rank(s), rank r giving [r+1, 10(r+1)]: [%g, %g] on every rank\n", N,
                    x.data<const double>()[0], x.data<const double>()[1]);
        // A ring: N-1 steps of reduce-scatter then N-1 of all-gather, each passing 1/N of the data.
        const double megabytes = double(GatedTransformerLM(TrainConfig::preset("small").model).num_parameters()) * 4 / 1e6;
        std::printf("   the small preset's gradient is %.2f MB; a ring all-reduce sends, per rank:\n", megabytes);
        for (int n : {2, 4, 8, 64})
            std::printf("     N = %2d: 2(N-1)/N x %.2f MB = %.2f MB\n", n, megabytes, 2.0 * (n - 1) / n * megabytes);
    }

    // 3. Train: N ranks, each on its B sequences of every global batch of N·B.
    if (say) std::printf("\n3. the tiny preset, %lld steps, %d rank(s) x %lld sequences of %lld tokens\n", (long long)steps, N,
                         (long long)B, (long long)T);
    std::fflush(stdout);
    Trainer trainer(config, data);
    if (group) trainer.distribute(group);
    const TrainResult together = trainer.run(true);
    if (say) {
        // The trainer's own progress lines (as gatedgrad train prints them), from its log: under
        // mpirun the output is a terminal, which would get a progress bar drawn in place.
        for (const StepLog& s : together.log) {
            if (s.step % config.log_every != 0 && s.step != 1) continue;
            std::printf("   step %3lld/%lld  loss %.4f  lr %.2e  %6.0f tok/s on %d rank(s)\n", (long long)s.step,
                        (long long)steps, s.loss, s.lr, s.tokens_per_s, N);
            if (!std::isnan(s.val_loss)) std::printf("     validation loss %.4f\n", s.val_loss);
        }
        std::printf("   averaging the gradients took %.2f s of the %.1f s\n", trainer.seconds_averaging(), together.seconds);
        // The same run in this one process, with the whole batch of N·B.
        TrainConfig alone_config = config;
        alone_config.batch_size = N * B, alone_config.world_size = 1;
        Trainer alone(alone_config, data);
        const TrainResult one = alone.run(true);
        std::printf("   1 process x %lld sequences: final loss %.4f, validation %.4f\n", (long long)(N * B),
                    one.log.back().loss, one.final_val_loss);
        std::printf("   %d rank(s) x %lld sequences: final loss %.4f, validation %.4f\n", N, (long long)B,
                    together.log.back().loss, together.final_val_loss);
        const double drift = relative_difference(weights(trainer.model()), weights(alone.model()));
        std::printf("   their weights differ by %s 1e-6 of their size\n", drift < 1e-6 ? "less than" : "MORE than");
    }
    return 0;
}
