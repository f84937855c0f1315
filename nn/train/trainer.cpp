#include "nn/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "nn/io/checkpoint.h"
#include "nn/train/log_file.h"
#include "nn/untrusted.h"

namespace gg::nn {

// ---------------------------------------------------------------- trainer

std::string new_run_id() {
    std::random_device entropy;
    const uint64_t id = (uint64_t(entropy()) << 32) ^ entropy();
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", (unsigned long long)id);
    return text;
}

Trainer::Trainer(const TrainConfig& config, std::shared_ptr<const BatchSource> data, Device device, uint64_t memory)
    : config_(config), data_(std::move(data)), device_(device), sampler_(config.seed) {
    config.validate();
    check_memory(config.model, Workload::training, config.batch_size, config.seq_len, memory);
    // One batch of each kind, drawn before the model is built: data too short for either
    // fails here, naming the sizes, not at the first evaluation after training began.
    Generator probe(config.seed);
    data_->train_batch(1, config.seq_len, probe);
    data_->val_batch(0, config.batch_size * config.world_size, config.seq_len);  // N ranks validate on N·B
    manual_seed(config.seed);  // parameter init draws from the default generator
    model_ = std::make_shared<GatedTransformerLM>(config.model);  // initialised on the CPU: the same on any device
    model_->to(device);
    optimizer_ = std::make_unique<AdamW>(model_->parameters(), config.lr, config.beta1, config.beta2, 1e-8,
                                         config.weight_decay);
    if (config.independent_weight_decay) optimizer_->decay_peak_lr = config.lr;
}

namespace {
// The sampler's 256-bit state as four int64s (bit-for-bit).
Tensor generator_state_tensor(const Generator& gen) {
    const auto s = gen.state();
    std::vector<int64_t> v(4);
    std::memcpy(v.data(), s.data(), sizeof(s));
    return from_vector(v, {4});
}
}  // namespace

void Trainer::save(const std::string& path) const {
    NamedTensors extra = with_prefix("optim.", optimizer_->state_dict());
    extra.emplace_back("trainer.step", from_vector(std::vector<int64_t>{step_}, {1}));
    extra.emplace_back("trainer.sampler", generator_state_tensor(sampler_));
    Metadata metadata{{"config", config_.model.to_json()}, {"train_config", config_.to_json()}};
    if (!unlogged_line_.empty()) metadata["unlogged_line"] = unlogged_line_;
    nn::save(*model_, path, metadata, extra);
}

namespace {
// The trainer's own values in a checkpoint, read before anything is loaded: copy_state
// checks names, shapes and dtypes, this the values a file could still get wrong.
void check_trainer_state(const NamedTensors& file, const Metadata& metadata, const std::string& path) {
    const auto fail = [&](const std::string& why) { throw std::runtime_error("checkpoint: " + path + ": " + why); };
    const auto find = [&](const std::string& name, const Shape& shape) -> const Tensor* {
        for (const auto& [n, t] : file) {
            if (n != name) continue;
            // Said here, before the counts it bounds are checked against a step it does not hold.
            if (t.shape() != shape || t.dtype() != DType::i64)
                fail(name + " is " + dtype_name(t.dtype()) + " " + shape_str(t.shape()) + ", not int64 " + shape_str(shape));
            return &t;
        }
        return nullptr;  // absent: copy_state says so
    };
    int64_t run_step = 0;
    if (const Tensor* step = find("trainer.step", {1})) {
        run_step = step->data<const int64_t>()[0];
        if (run_step < 0 || run_step > TrainConfigLimits::steps)
            fail("trainer.step " + std::to_string(run_step) + " is outside [0, " +
                 std::to_string(TrainConfigLimits::steps) + "]");
    }
    if (const Tensor* sampler = find("trainer.sampler", {4})) {
        const int64_t* s = sampler->data<const int64_t>();
        if (std::all_of(s, s + 4, [](int64_t w) { return w == 0; }))
            fail("trainer.sampler is all zero, which is no state of the generator (it would draw zeros forever)");
    }
    for (const auto& [name, t] : file) {
        if (!name.starts_with("optim.step.") || t.shape() != Shape{} || t.dtype() != DType::i64) continue;
        const int64_t n = t.data<const int64_t>()[0];
        if (n < 0 || n > run_step)  // a parameter steps at most once per training step
            fail(name + " " + std::to_string(n) + " is outside [0, " + std::to_string(run_step) +
                 "], the run's step count");
    }
    if (auto it = metadata.find("unlogged_line"); it != metadata.end()) {  // written by a run its log stopped
        const auto j = nlohmann::json::parse(it->second, nullptr, false);
        if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
            j["step"].get<int64_t>() != run_step || it->second.find('\n') != std::string::npos)
            fail("its unlogged_line is not one log line of step " + std::to_string(run_step) + ", the step it holds");
    }
}
}  // namespace

namespace {
// Σ p² over every parameter, summed in float64 on their device. It is finite when every
// weight is; when the sum alone overflows, check_finite finds nothing wrong and training goes on.
double sum_of_squares(const std::vector<Tensor>& params) {
    if (params.empty()) return 0;
    const Tensor acc = zeros({}, DType::f64, params.front().device());
    std::vector<Tensor> dense;  // the views below read these
    std::vector<View> views;
    for (const Tensor& p : params) views.push_back(dense.emplace_back(p.detach().contiguous()).view_desc());
    backend(acc.device()).sum_squares(acc.view_desc(), views);
    return acc.item();
}
}  // namespace

namespace {
// Every line of a run's log.jsonl that names a run must name this one: a log copied in
// from another run would otherwise be continued as if it were this run's history.
void check_log_run(const std::filesystem::path& log, const std::string& run_id) {
    std::ifstream in(log);
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("run") && j["run"].is_string() && j["run"].get<std::string>() != run_id)
            throw std::runtime_error(log.string() + ":" + std::to_string(number) + ": a line of run " +
                                     j["run"].get<std::string>() + ", not of run " + run_id +
                                     " (a log copied from another run?)");
    }
}
}  // namespace

void Trainer::resume(const std::string& path) {
    NamedTensors extra = with_prefix("optim.", optimizer_->state_dict());
    Tensor step = zeros({1}, DType::i64), sampler = zeros({4}, DType::i64);
    extra.emplace_back("trainer.step", step);
    extra.emplace_back("trainer.sampler", sampler);
    // Everything is checked before anything changes: a bad file leaves the trainer as it was.
    Metadata metadata;
    const NamedTensors file = load_tensors(path, &metadata);
    std::unique_ptr<TrainConfig> planned;
    if (auto it = metadata.find("train_config"); it != metadata.end())
        planned = std::make_unique<TrainConfig>(TrainConfig::from_json(it->second));
    if (planned && planned->world_size != config_.world_size)
        throw std::runtime_error("checkpoint: " + path + ": the run trained on " + std::to_string(planned->world_size) +
                                 " process(es) (a global batch of " + std::to_string(planned->world_size) + " x " +
                                 std::to_string(planned->batch_size) + "), not " + std::to_string(config_.world_size) +
                                 ": resume it with mpirun -np " + std::to_string(planned->world_size));
    if (planned && !planned->run_id.empty() && !config_.run_id.empty() && planned->run_id != config_.run_id)
        throw std::runtime_error("checkpoint: " + path + ": it belongs to run " + planned->run_id + ", not to run " +
                                 config_.run_id + " whose config this is (a checkpoint copied from another run?)");
    if (!config_.out_dir.empty() && !config_.run_id.empty())
        check_log_run(std::filesystem::path(config_.out_dir) / "log.jsonl", config_.run_id);
    check_trainer_state(file, metadata, path);
    check_finite(file, "checkpoint: " + path);
    NamedTensors targets = model_->state_dict();
    targets.insert(targets.end(), extra.begin(), extra.end());
    copy_state(targets, file, "checkpoint: " + path, "the file", "the model and extras");
    step_ = step.data<const int64_t>()[0];
    std::array<uint64_t, 4> s;
    std::memcpy(s.data(), sampler.data<const int64_t>(), sizeof(s));
    sampler_.set_state(s);
    saved_step_ = step_;
    unlogged_line_ = metadata.contains("unlogged_line") ? metadata.at("unlogged_line") : "";
    if (planned) continue_schedule(*planned);
}

void Trainer::distribute(std::shared_ptr<dist::ProcessGroup> group) {
    if (!group) throw std::invalid_argument("Trainer::distribute: no process group");
    if (group->world_size() != config_.world_size)
        throw std::invalid_argument("Trainer::distribute: the config's world_size is " +
                                    std::to_string(config_.world_size) + ", the process group has " +
                                    std::to_string(group->world_size()) + " ranks");
    group_ = std::move(group);
    buckets_ = std::make_unique<dist::GradientBuckets>(optimizer_->params(), group_);
    update_wait_limits();
    // Every rank built the same weights from the same seed; the broadcast makes sure of it.
    buckets_->broadcast_parameters(0);
}

void Trainer::set_rank_timeout(double seconds) {
    if (!(seconds >= 0) || !std::isfinite(seconds))
        throw std::invalid_argument("Trainer::set_rank_timeout: " + std::to_string(seconds) + " is not a number of seconds >= 0");
    rank_timeout_ = seconds;
    update_wait_limits();
}

void Trainer::update_wait_limits() {
    if (!group_) return;
    dist::WaitLimits limits = group_->wait_limits();
    limits.timeout_s = rank_timeout_ > 0 ? rank_timeout_ : std::max(kDefaultRankTimeout, 10 * slowest_step_);
    limits.after_stop_s = 10 + 2 * slowest_step_;
    group_->set_wait_limits(limits);
}

void Trainer::continue_schedule(const TrainConfig& planned) {
    resume_note_.clear();
    if (planned.steps == config_.steps) {  // the same plan: the same curve, restarted or not
        config_.restart_step = planned.restart_step, config_.restart_lr = planned.restart_lr;
        return;
    }
    // A different length. Inside the warmup the new curve joins the old one smoothly; past it,
    // the new curve would jump (a finished 600-step run extended to 1200 would go from
    // min_lr back up to the middle of a longer cosine), so the decay restarts from here.
    const LrSchedule old = planned.schedule();
    if (step_ < config_.schedule().warmup_steps || step_ >= config_.steps) return;
    config_.restart_step = step_;
    config_.restart_lr = lr_at(old, step_);
    // The curve runs from where the run stands to the new minimum, lr · min_lr_ratio: a
    // raised --lr can put that minimum above where the run stands, and then it climbs.
    const double from = config_.restart_lr, to = config_.lr * config_.min_lr_ratio;
    char path[192];
    if (from > to)
        std::snprintf(path, sizeof path, "goes on from %.2e, where the first plan left it, down a cosine to %.2e", from,
                      to);
    else if (from < to)
        std::snprintf(path, sizeof path,
                      "goes on from %.2e, where the first plan left it, up a half cosine to %.2e (the new minimum, "
                      "lr x min_lr_ratio, is above it)",
                      from, to);
    else
        std::snprintf(path, sizeof path, "stays at %.2e, where the first plan left it, through", from);
    char note[448];
    std::snprintf(note, sizeof note,
                  "the run was planned for %lld steps and now has %lld: from step %lld the learning rate %s%s step %lld",
                  (long long)planned.steps, (long long)config_.steps, (long long)step_ + 1, path,
                  from == to ? "" : " at", (long long)config_.steps);
    resume_note_ = note;
}

StabilityStats Trainer::probe() const {
    const Batch b = data_->val_batch(0, config_.batch_size * world_size(), config_.seq_len);
    return measure_stability(*model_, b.inputs.to(device_));
}

double Trainer::evaluate(int64_t seq_len) const {
    NoGradGuard no_grad;
    const int64_t T = seq_len > 0 ? seq_len : config_.seq_len, B = config_.batch_size * world_size();
    const int64_t n = std::min(config_.eval_batches, data_->val_batches(B, T));
    if (n < 1) throw std::runtime_error("evaluate: the validation text is too short for one batch");
    // Rank r takes batches r, r + N, r + 2N, ...; the sum of all of them comes back to every rank.
    double total = 0;
    for (int64_t i = rank(); i < n; i += world_size()) {
        const Batch b = data_->val_batch(i, B, T);
        const Autocast mixed_precision(config_.precision);  // measured as trained
        total += model_->forward(b.inputs.to(device_), b.targets.to(device_)).loss.item();
    }
    if (group_) {
        const Tensor sum = from_vector(std::vector<double>{total}, {1});
        group_->all_reduce(sum, dist::ReduceOp::sum);
        total = sum.item();
    }
    return total / double(n);
}

namespace {

// One status line: a bar on a terminal (rewritten in place), plain lines otherwise. Data
// parallel, the tokens per second are those of all `world` ranks together.
void print_progress(const StepLog& s, int64_t total, double elapsed, bool tty, int world) {
    const double eta = s.step > 0 ? elapsed / s.step * (total - s.step) : 0;
    char line[256];
    std::snprintf(line, sizeof line, "step %5lld/%lld  loss %.4f  lr %.2e  %6.0f tok/s%s  eta %4.0fs",
                  static_cast<long long>(s.step), static_cast<long long>(total), s.loss, s.lr, s.tokens_per_s,
                  world > 1 ? (" on " + std::to_string(world) + " ranks").c_str() : "", eta);
    if (tty) {
        const int width = 20, filled = total ? int(width * s.step / total) : width;
        std::printf("\r[%s%s] %s", std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), line);
        if (!std::isnan(s.val_loss) || s.step == total) std::printf("\n");
    } else {
        std::printf("%s\n", line);
    }
    if (!std::isnan(s.val_loss)) std::printf("  validation loss %.4f (%.3f bits/byte)\n", s.val_loss, s.val_loss / M_LN2);
    std::fflush(stdout);
}

}  // namespace

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

// What one call of run() keeps from step to step.
struct Trainer::Run {
    TrainResult result;
    std::unique_ptr<LogFile> log;  // null: no out_dir, or not the rank that writes
    int64_t last = 0;              // the step this call ends after
    bool writer = false;           // the rank that writes the log and the checkpoints
    bool quiet = false, tty = false;
    Clock::time_point start, last_save;
};

// The loop: a step, what is kept of it, the progress line, a checkpoint when one is due.
// Each pass ends a step or the run; r.result says why the run ended early.
TrainResult Trainer::run(bool quiet, int64_t stop_at) {
    Run r;
    r.writer = rank() == 0;
    r.quiet = quiet || !r.writer;
    r.tty = isatty(fileno(stdout));
    r.last = stop_at > 0 ? std::min(stop_at, config_.steps) : config_.steps;
    if (r.writer) r.log = open_log();
    r.start = r.last_save = Clock::now();
    model_->train();
    while (step_ < r.last) {
        const auto t0 = Clock::now();
        std::optional<StepLog> s = train_step(r);
        if (!s || !record(r, *s)) break;
        if (!r.quiet && (step_ % std::max<int64_t>(1, config_.log_every) == 0 || evaluates_now() || step_ == 1))
            print_progress(*s, config_.steps, seconds_since(r.start), r.tty, world_size());
        if (checkpoint_due(r)) save_now(r);
        // The whole pass, evaluation and checkpoint included: what another rank may wait for.
        if (const double pass = seconds_since(t0); pass > slowest_step_) slowest_step_ = pass, update_wait_limits();
    }
    r.result.seconds = seconds_since(r.start);
    if (!r.quiet && !r.result.message.empty()) std::printf("%s\n", r.result.message.c_str());
    return r.result;
}

// out_dir/log.jsonl, fresh for a new run; a resumed one first cuts the steps logged after its
// checkpoint (they are done again) and appends the line the log could not take before.
std::unique_ptr<LogFile> Trainer::open_log() {
    if (config_.out_dir.empty()) return nullptr;
    std::filesystem::create_directories(config_.out_dir);
    const std::string path = (std::filesystem::path(config_.out_dir) / "log.jsonl").string();
    std::unique_ptr<LogFile> log;
    if (step_ > 0) {
        const LogCut cut = cut_log(path, step_);
        if (!cut.warning.empty()) std::fprintf(stderr, "warning: %s\n", cut.warning.c_str());
        log = std::make_unique<LogFile>(path, false);
        if (!unlogged_line_.empty() && cut.last_step < step_) log->append(unlogged_line_);
    } else {
        log = std::make_unique<LogFile>(path, true);
    }
    unlogged_line_.clear();
    return log;
}

// Step step_ + 1: its batch, forward, the loss and stop requests shared by the ranks, backward
// and the update. Returns the step's numbers, or nothing when the run ends before or inside
// it (a stop request, a divergence), with r.result saying why.
std::optional<StepLog> Trainer::train_step(Run& r) {
    const TrainConfig& c = config_;
    // Asked at the step boundary. Data parallel, the ranks learn of it together with the
    // step's loss (share_step), and all stop before that step's update.
    int reason = stop_request_ ? stop_request_->load() : 0;
    if (reason != 0 && !group_) {
        r.result.stop_reason = reason, r.result.stop_rank = 0;
        stop_here(r);
        return std::nullopt;
    }
    const auto t0 = Clock::now();
    optimizer_->lr = lr_at(c.schedule(), step_);
    // The global batch, of which this rank keeps its own rows (all of them in one process).
    const std::array<uint64_t, 4> sampler_before = sampler_.state();  // a stop draws this batch again
    const Batch global = data_->train_batch(c.batch_size * world_size(), c.seq_len, sampler_);
    const Tensor inputs = global.inputs.narrow(0, rank() * c.batch_size, c.batch_size).contiguous(),
                 targets = global.targets.narrow(0, rank() * c.batch_size, c.batch_size).contiguous();
    LMOutput out;
    Tensor objective, z;
    {
        // Forward only: backward follows the dtypes forward chose (autograd/autocast.h).
        const Autocast mixed_precision(c.precision);
        out = model_->forward(inputs.to(device_), targets.to(device_));
        objective = out.loss;
        if (c.z_loss > 0) objective = objective + (z = z_loss(out.logits)) * c.z_loss;
    }
    // The cross-entropy alone, comparable across runs; the z-loss apart.
    StepLog s{step_ + 1, out.loss.item(), optimizer_->lr, NAN, NAN, NAN, z.defined() ? z.item() : NAN, std::nullopt};
    reason = share_step(s, reason, r.result.stop_rank);
    r.result.stop_reason = reason;
    if (reason != 0) {  // before this step's update, and its batch not drawn: the state of the step before
        sampler_.set_state(sampler_before);
        stop_here(r);
        return std::nullopt;
    }
    if (!std::isfinite(s.loss)) {
        r.result.diverged = true;
        r.result.message = "training stopped: the loss is " + std::to_string(s.loss) + " at step " +
                           std::to_string(step_ + 1) + kept();
        return std::nullopt;
    }
    optimizer_->zero_grad();
    objective.backward();
    if (buckets_) buckets_->average();
    s.grad_norm = clip_grad_norm(optimizer_->params(), c.grad_clip > 0 ? c.grad_clip : INFINITY);
    optimizer_->step();
    try {  // a huge step can overflow the weights with a finite loss; never checkpoint them
        // One number per step comes back from the device; only a bad one looks tensor by tensor.
        if (!std::isfinite(sum_of_squares(optimizer_->params())))
            check_finite(model_->named_parameters(), "after the update");
    } catch (const std::runtime_error& e) {
        r.result.diverged = true;
        r.result.message = "training stopped: the weights are not finite at step " + std::to_string(step_ + 1) + " (" +
                           e.what() + ")" + kept();
        return std::nullopt;
    }
    ++step_;
    s.tokens_per_s = double(world_size() * c.batch_size * c.seq_len) / seconds_since(t0);
    return s;
}

// Data parallel: every rank's mean loss (and z-loss) into s, and each rank's stop request in
// a slot of its own; returns the request of the lowest rank that was asked (0: none), its
// rank in stop_rank. In one process: the request as it stands.
int Trainer::share_step(StepLog& s, int reason, int& stop_rank) {
    if (!group_) return reason;
    const int world = world_size();
    std::vector<double> sums_in(2 + size_t(world), 0.0);
    sums_in[0] = s.loss, sums_in[1] = std::isnan(s.z_loss) ? 0 : s.z_loss, sums_in[2 + size_t(rank())] = reason;
    const Tensor step_sums = from_vector(sums_in, {int64_t(sums_in.size())});
    group_->all_reduce(step_sums, dist::ReduceOp::sum);
    const double* sums = step_sums.data<const double>();
    s.loss = sums[0] / world;
    if (!std::isnan(s.z_loss)) s.z_loss = sums[1] / world;
    for (int rank = 0; rank < world; ++rank)
        if (sums[2 + rank] != 0) return stop_rank = rank, int(sums[2 + rank]);
    return 0;
}

bool Trainer::evaluates_now() const {
    return (config_.eval_every > 0 && step_ % config_.eval_every == 0) || step_ == config_.steps;
}

// What is kept of a step done: the probe and the validation loss when due, the step in the
// result and its line in the log. Returns false when the log could not take the line: the
// run ends there, with a checkpoint that holds the line for the resumed run to append.
bool Trainer::record(Run& r, StepLog& s) {
    const TrainConfig& c = config_;
    // sigmoid's and softpick's weights give no largest logit (measure_stability): not probed.
    if (r.writer && c.probe_every > 0 && is_softmax(c.model.attn.score_fn) &&
        (step_ % c.probe_every == 0 || step_ == r.last))
        s.probe = probe();
    if (evaluates_now()) {
        model_->eval();
        s.val_loss = evaluate();
        model_->train();
        r.result.final_val_loss = s.val_loss;
    }
    r.result.log.push_back(s);
    if (!r.log) return true;
    nlohmann::json j = {{"step", s.step}, {"loss", s.loss}, {"lr", s.lr}, {"grad_norm", s.grad_norm},
                        {"tokens_per_s", s.tokens_per_s}};
    if (evaluates_now()) j["val_loss"] = s.val_loss;
    if (c.z_loss > 0) j["z_loss"] = s.z_loss;
    if (s.probe) j.update(nlohmann::json::parse(s.probe->to_json()));
    if (!c.run_id.empty()) j["run"] = c.run_id;
    const std::string line = j.dump();
    try {
        r.log->append(line);
        return true;
    } catch (const std::runtime_error& e) {
        // Training on would leave steps no log holds. The step is done, so its line goes into
        // the checkpoint, for the resumed run to append.
        unlogged_line_ = line;
        r.result.log_failed = true;
        const std::string step = std::to_string(step_);
        std::string saved;
        try {
            save_now(r);
            saved = "; saved the checkpoint of step " + step + " with that step's line in it, for the resumed run to append";
        } catch (const std::exception& f) {
            saved = "; saving the checkpoint failed too (" + std::string(f.what()) + ")" + kept();
        }
        r.result.message = "training stopped after step " + step + ": " + e.what() + saved;
        return false;
    }
}

// Every ckpt_every steps, every ckpt_minutes, and after the last step of this call.
bool Trainer::checkpoint_due(const Run& r) const {
    const TrainConfig& c = config_;
    const double minutes = seconds_since(r.last_save) / 60;
    return !c.out_dir.empty() && ((c.ckpt_every > 0 && step_ % c.ckpt_every == 0) || step_ == r.last ||
                                  (c.ckpt_minutes > 0 && minutes >= c.ckpt_minutes));
}

void Trainer::save_now(Run& r) {
    if (r.writer) {
        if (r.log) r.log->sync();  // on the disk, the log holds every step the checkpoint does
        save((std::filesystem::path(config_.out_dir) / "model.safetensors").string());
    }
    saved_step_ = step_;
    r.last_save = Clock::now();
}

void Trainer::stop_here(Run& r) {
    if (!config_.out_dir.empty()) save_now(r);
    r.result.stopped = true;
    r.result.message = "stopped on request after step " + std::to_string(step_) +
                       (config_.out_dir.empty() ? "" : "; checkpoint saved");
}

// What a divergence leaves: the checkpoint of an earlier step, or nothing to go back to.
std::string Trainer::kept() const {
    return saved_step_ >= 0 ? "; the checkpoint of step " + std::to_string(saved_step_) + " is kept"
                            : std::string("; no checkpoint was written before it, so there is none to resume from");
}

}  // namespace gg::nn
