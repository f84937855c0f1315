// data_parallel.cpp — how fast data-parallel training goes: the global tokens per second of
// a preset trained on N ranks, and the share of each step spent averaging the gradients.
//
//   ./build/bench/data_parallel small [steps]                                        1 rank
//   mpirun -np 2 -x OMP_NUM_THREADS=1 ./build/bench/data_parallel small [steps]      2 ranks
//
// Each rank trains on the preset's batch (weak scaling: N ranks do N times the work of one
// step), so perfect scaling is N times the tokens per second of 1 rank. Rank 0 prints one
// JSON line: the median step's global tokens/s, and the seconds in GradientBuckets::average
// (copies, the all-reduce, and any wait for a slower rank) as a share of the training time.
// bench/data_parallel.sh runs 1 and 2 ranks a few times each.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: data_parallel tiny|small|medium [steps]   (under mpirun -np N for N ranks)\n");
        return 2;
    }
    std::shared_ptr<dist::ProcessGroup> group;
    try {
        if (dist::launched_by_mpi()) group = dist::init_mpi();
        TrainConfig c = TrainConfig::preset(argv[1]);
        c.steps = argc > 2 ? std::stoll(argv[2]) : 20;
        c.world_size = group ? group->world_size() : 1;
        c.warmup = 0, c.eval_every = 0, c.probe_every = 0, c.ckpt_minutes = 0;
        const auto data = std::make_shared<TextDataset>(load_documents(c.data), c.split);
        Trainer trainer(c, data);
        if (group) trainer.distribute(group);
        const TrainResult result = trainer.run(true);
        std::vector<double> rates;
        for (const StepLog& s : result.log) rates.push_back(s.tokens_per_s);
        std::sort(rates.begin(), rates.end());
        if (trainer.rank() == 0)
            std::printf("{\"preset\": \"%s\", \"ranks\": %d, \"batch_per_rank\": %lld, \"seq_len\": %lld, \"steps\": %lld, "
                        "\"tokens_per_s\": %.0f, \"averaging_share\": %.3f, \"threads\": \"%s\"}\n",
                        argv[1], trainer.world_size(), (long long)c.batch_size, (long long)c.seq_len,
                        (long long)c.steps, rates[rates.size() / 2], trainer.seconds_averaging() / result.seconds,
                        std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "data_parallel: %s\n", e.what());
        if (group && group->world_size() > 1) group->abort(1);
        return 1;
    }
}
