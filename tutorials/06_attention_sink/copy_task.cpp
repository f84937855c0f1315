// copy_task.cpp — tutorial 06, part (a): the attention sink on Bigram-Backcopy; the task and
// the training of each model.
//
// The task (nn/train/synthetic.h): a Markov chain over 64 tokens, except that right after a
// trigger token comes a copy of the token before it. So the query at a trigger must read one
// position back, and every other query has nothing useful to read. We train a baseline and
// a G1 model on the same batches and measure, for the two kinds of query separately, where
// the attention goes: BOS (α), the query's own token, the previous token; for G1, the gate;
// and how large the value vector is at BOS next to the other tokens (the "value drain").
// copy_task.h lists the other files of part (a): the measurements, the report and the files.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/timing.h"
#include "copy_task.h"

using namespace gg;
using namespace gg::nn;
using namespace tutorial;

namespace {

ModelShape parse_shape(const std::string& text, int64_t d_model) {
    ModelShape s;
    if (std::sscanf(text.c_str(), "%" SCNd64 "x%" SCNd64, &s.layers, &s.heads) != 2 || s.layers < 1 || s.heads < 1 ||
        d_model % s.heads)
        throw std::invalid_argument("model shape '" + text + "' is not LAYERSxHEADS with heads dividing d_model " +
                                    std::to_string(d_model));
    return s;
}

}  // namespace

const Fields<CopySetup>& copy_setup_fields() {
    using S = CopySetup;
    constexpr int64_t any = std::numeric_limits<int64_t>::max();
    static const Fields<CopySetup> rows = {
        // key (the option is --a-KEY), where it lives and its check, no flag of train's, help
        {"concentration", at<&S::concentration>({0}), nullptr,
         "Dirichlet concentration of the chain's rows over all tokens; 0: --a-successors likely successors per token"},
        {"successors", at<&S::successors>({1, 64}), nullptr, "successors per token (concentration 0)"},
        {"triggers", at<&S::triggers>({1, 31}), nullptr, "trigger tokens"},
        {"models", at<&S::models>(), nullptr, "model shapes LAYERSxHEADS, e.g. 1x1 2x4"},
        {"d_model", at<&S::d_model>({1, LMConfigLimits::d_model}), nullptr, "model width"},
        {"ffn", at<&S::ffn>(), nullptr, "blocks with the SwiGLU FFN (true) or attention only (false)"},
        {"init", at<&S::init>(parse_lm_init, lm_init_name), nullptr, "gpt2 or torch initialisation (LMConfig::init)"},
        {"positions", at<&S::positions>(parse_position_encoding, position_encoding_name), nullptr,
         "rope or learned (absolute) positions"},
        {"seeds", at<&S::seeds>({1, any}), nullptr, "seeds 1 ... N"},
        {"steps", at<&S::steps>({1, any}), nullptr, "training steps"},
        {"batch", at<&S::batch>({1, any}), nullptr, "sequences per batch"},
        {"seq_len", at<&S::seq_len>({4, 512}), nullptr, "tokens per sequence"},
        {"warmup", at<&S::warmup>({0, any}), nullptr, "warmup steps"},
        {"lr", at<&S::lr>({0, INFINITY, true}), nullptr, "peak learning rate"},
        {"weight_decay", at<&S::weight_decay>({0}), nullptr, "AdamW weight decay"},
    };
    return rows;
}

BigramBackcopyOptions task_options(const CopySetup& s) {
    BigramBackcopyOptions o;
    o.concentration = s.concentration, o.successors = s.successors, o.triggers = s.triggers;
    return o;
}

// α of a query that spreads its attention evenly over the keys it sees, averaged over the
// queries t = 1 … T−1: 1/(t+1) keys with its own, 1/t without.
double even_alpha(const CopySetup& s) {
    double sum = 0;
    for (int64_t t = 1; t < s.seq_len; ++t) sum += 1.0 / double(s.exclude_self ? t : t + 1);
    return sum / double(s.seq_len - 1);
}

TrainConfig copy_config(const CopySetup& s, const ModelShape& shape, GatePosition gate, int64_t seed) {
    TrainConfig c;
    c.model.vocab_size = 65;
    c.model.d_model = s.d_model, c.model.n_layers = shape.layers, c.model.attn.n_heads = shape.heads;
    c.model.attn.gate = gate;
    c.model.ffn = s.ffn;
    c.model.init = s.init;
    c.model.attn.exclude_self = s.exclude_self;
    c.model.positions = s.positions;
    c.batch_size = s.batch, c.seq_len = s.seq_len, c.model.max_len = s.seq_len;
    c.steps = s.steps, c.lr = s.lr, c.weight_decay = s.weight_decay, c.warmup = s.warmup;
    c.eval_every = 0, c.eval_batches = 4, c.seed = uint64_t(seed);
    return c;
}

std::vector<CopyRunSpec> run_specs(const CopySetup& s) {
    std::vector<CopyRunSpec> specs;
    for (const std::string& m : s.models)
        for (int64_t seed = 1; seed <= s.seeds; ++seed)
            for (GatePosition gate : {GatePosition::none, GatePosition::sdpa_output})
                specs.push_back({parse_shape(m, s.d_model), gate, seed});
    return specs;
}

TrainedCopy train_and_measure(const CopySetup& s, const ModelShape& shape, int64_t seed,
                              const std::function<void(LMConfig&)>& configure) {
    TrainedCopy t;
    t.data = std::make_shared<BigramBackcopy>(task_options(s));
    t.config = copy_config(s, shape, GatePosition::none, seed);
    configure(t.config.model);
    t.trainer = std::make_unique<Trainer>(t.config, t.data);
    t.trainer->run(/*quiet=*/true);
    t.trainer->model().eval();
    t.report = measure_copy(t.trainer->model(), *t.data, 4, t.config.batch_size, t.config.seq_len);
    return t;
}

namespace {

// The curve measured along the training, on 2 validation batches: means over layers and heads.
const std::vector<std::string> kCurveKeys{"step",       "trigger_loss", "other_loss",  "alpha_other", "alpha_trigger",
                                          "gate_other", "gate_trigger", "value_bos",   "value_other"};

// Trains one model in a child process, measuring `points` times along the way (Trainer::run
// pauses and continues on the same schedule, see trainer.h); saves it to `checkpoint`.
std::string train_copy(const CopySetup& s, const CopyRunSpec& spec, const std::string& checkpoint) {
    const auto data = std::make_shared<BigramBackcopy>(task_options(s));
    const TrainConfig c = copy_config(s, spec.shape, spec.gate, spec.seed);
    const auto start = Clock::now();
    Trainer trainer(c, data);
    json curve;
    for (const std::string& key : kCurveKeys) curve[key] = json::array();
    for (int64_t k = 1; k <= s.points; ++k) {
        trainer.run(true, k * s.steps / s.points);
        trainer.model().eval();
        const CopyReport r = measure_copy(trainer.model(), *data, 2, c.batch_size, c.seq_len);
        trainer.model().train();
        const std::vector<double> values{double(trainer.step()),
                                         r.trigger.loss / r.trigger.count,
                                         r.other.loss / r.other.count,
                                         r.other.mean_all(r.other.alpha),
                                         r.trigger.mean_all(r.trigger.alpha),
                                         r.gated ? r.other.mean_all(r.other.gate) : NAN,
                                         r.gated ? r.trigger.mean_all(r.trigger.gate) : NAN,
                                         CopyReport::mean(r.value_bos),
                                         CopyReport::mean(r.value_other)};
        for (size_t i = 0; i < kCurveKeys.size(); ++i) curve[kCurveKeys[i]].push_back(values[i]);
    }
    trainer.save(checkpoint);
    const double seconds = seconds_since(start);
    std::printf("  trained %-20s in %4.0f s: alpha at non-trigger queries %.3f\n", spec.label().c_str(), seconds,
                curve["alpha_other"].back().get<double>());
    return json{{"checkpoint", checkpoint}, {"seconds", seconds}, {"curve", curve}}.dump();
}

}  // namespace

std::vector<TrainingJob> copy_task_jobs(const CopySetup& setup, const std::string& scratch) {
    std::vector<TrainingJob> jobs;
    for (const CopyRunSpec& spec : run_specs(setup)) {
        const std::string checkpoint = scratch + "/" + setup.name + "_" + std::to_string(jobs.size()) + ".safetensors";
        jobs.push_back({checkpoint, [=] { return train_copy(setup, spec, checkpoint); }});
    }
    return jobs;
}
