// test_app_report.cpp — what `gatedgrad report` shows beyond a finished run: a run still
// training (a log, no checkpoint yet), a live page (--watch) that stops reloading when the
// runs end, the gradient norm and throughput of every log line, the settings two runs do not
// share, a sink sentence that follows the numbers, and a log of 200,000 steps drawn from a
// few thousand points per curve; the page of a model on a prompt (report --prompt), and what it
// refuses. tests/test_report.cpp loads the pages in a browser.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "gatedgrad.h"
#include "tests/app_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;
namespace fs = std::filesystem;

namespace {

// The numbers of every points="x,y x,y ..." attribute in an SVG, the largest of them.
size_t most_points(const std::string& html) {
    size_t most = 0;
    for (size_t at = 0; (at = html.find("points=\"", at)) != std::string::npos;) {
        at += 8;
        const size_t end = html.find('"', at);
        most = std::max(most, count(html.substr(at, end - at), ",") );
        at = end;
    }
    return most;
}

// A run with a sink report and maps of one layer, from a tiny model with random weights.
RunReport measured_run(const std::string& name, int64_t sink_layers) {
    LMConfig c;
    c.d_model = 16, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = 8;
    GatedTransformerLM model(c);
    const Tensor ids = from_vector(std::vector<int64_t>{256, 72, 101, 108, 108, 111, 32, 33}, {1, 8});
    RunReport run;
    run.name = name, run.gate = "baseline", run.description = "a tiny model";
    run.log.step = {1, 2}, run.log.loss = {5, 4}, run.log.lr = {1e-3, 1e-3};
    run.log.grad_norm = {1, 1}, run.log.tokens_per_s = {100, 100};
    run.sink = analyze(model, ids);
    run.sink.sink_layers = sink_layers;  // what the sentence is to follow
    run.maps = capture_attention_maps(model, ids);
    return run;
}

}  // namespace

TEST_CASE("report_html: a log of 200,000 steps is drawn from at most 4000 points a curve, a spike kept, and the page says so") {
    RunReport run;
    run.name = "long", run.gate = "g1", run.description = "a long run";
    run.pending = "no checkpoint yet";
    const size_t n = 200000, spike = 123457;
    for (size_t s = 1; s <= n; ++s) {
        run.log.step.push_back(double(s));
        run.log.loss.push_back(s == spike ? 97.5 : 2 + 1.0 / double(s));
        run.log.lr.push_back(1e-3);
        run.log.grad_norm.push_back(s == spike ? 555.0 : 1.0);
        run.log.tokens_per_s.push_back(1e4);
    }
    const std::string html = report_html({run});
    INFO("page of " << html.size() << " bytes");
    CHECK(html.size() < 1000000);
    CHECK(most_points(html) <= 4000);
    CHECK(most_points(html) >= 3000);
    CHECK(html.find("Each curve is drawn from at most 4000 points: long's log has 200000 steps, so every run of 100 "
                    "consecutive steps is drawn as its lowest and its highest value") != std::string::npos);
    // The spike of one step: the loss chart and the gradient norm's reach up to it.
    CHECK(html.find("gradient norm") != std::string::npos);
    CHECK(html.find(">500<") != std::string::npos);  // a tick of the gradient norm's axis, only there for 555
    CHECK(html.find(">100<") != std::string::npos);  // and of the loss's, only there for 97.5

    // A short log is drawn whole, and the page says nothing of cutting.
    RunReport short_run = run;
    for (auto* v : {&short_run.log.step, &short_run.log.loss, &short_run.log.lr, &short_run.log.grad_norm,
                    &short_run.log.tokens_per_s})
        v->resize(3000);
    const std::string whole = report_html({short_run});
    CHECK(whole.find("Each curve is drawn from at most") == std::string::npos);
    CHECK(most_points(whole) == 3000);

    // downsample itself: each bucket's lowest and highest in step order, gaps kept.
    Series s{"s", {}, {}, "", false, 1, {}};
    for (int i = 0; i < 10; ++i) s.x.push_back(i), s.y.push_back(i == 3 ? 9 : i == 6 ? -9 : i >= 8 ? NAN : 0);
    const Series cut = downsample(s, 6);  // 3 buckets: 0..2, 3..5, 6..9
    CHECK(cut.x == std::vector<double>{0, 3, 4, 6, 7});
    CHECK(cut.y[1] == 9);
    CHECK(cut.y[3] == -9);
    CHECK(downsample(s, 10).x.size() == 10);
}

TEST_CASE("report_html: the runs table marks the settings two runs do not share; the sink sentence follows the numbers") {
    RunReport a = measured_run("base", 1), b = measured_run("g1", 0);
    a.settings = {{"lr", "0.003"}, {"seed", "1"}, {"model.gate", "baseline"}};
    b.settings = {{"lr", "0.01"}, {"seed", "1"}, {"model.gate", "g1"}};
    b.gate = "g1";
    const std::string html = report_html({a, b});
    CHECK(html.find("<mark>lr 0.003</mark> <mark>model.gate baseline</mark>") != std::string::npos);
    CHECK(html.find("<mark>lr 0.01</mark> <mark>model.gate g1</mark>") != std::string::npos);
    CHECK(html.find("<mark>seed") == std::string::npos);
    CHECK(html.find("<mark>g1</mark>") != std::string::npos);  // the attention column
    CHECK(html.find("base has a sink in 1 of 1 layers and g1 in none") != std::string::npos);
    // The status line is there for a test to read, not for the reader: hidden until an error shows it.
    CHECK(html.find("<p id=\"status\" hidden>") != std::string::npos);
    CHECK(html.find("where the sink has formed") == std::string::npos);

    b.settings = a.settings, b.gate = a.gate;
    b.sink.sink_layers = 1;
    const std::string same = report_html({a, b});
    CHECK(same.find("<mark>") == std::string::npos);
    CHECK(count(same, "nothing: the same settings") == 2);
    CHECK(same.find("Both runs have sink layers: base in 1 of 1 layers, g1 in 1 of 1 layers") != std::string::npos);
    a.sink.sink_layers = b.sink.sink_layers = 0;
    CHECK(report_html({a, b}).find("Neither run has a sink layer here") != std::string::npos);
    CHECK(report_html({a}).find("This run has no sink layer here") != std::string::npos);
    CHECK(report_html({a}).find("differs (config.json)") == std::string::npos);  // nothing to compare with

    // A run without a checkpoint: curves and the reason, and no maps, script or status to wait for.
    RunReport pending = a;
    pending.sink = {}, pending.maps = {}, pending.pending = "no checkpoint yet";
    const std::string only = report_html({pending}, ReportOptions{7, 4000});
    CHECK(only.find("<meta http-equiv=\"refresh\" content=\"7\">") != std::string::npos);
    CHECK(only.find("base: no checkpoint yet") != std::string::npos);
    CHECK(only.find("<script") == std::string::npos);
    CHECK(only.find("id=\"status\"") == std::string::npos);
    CHECK(report_html({a, pending}).find("\"name\":\"base\"") != std::string::npos);  // the measured one is drawn
    CHECK(report_html({a}).find("http-equiv") == std::string::npos);
}

TEST_CASE("gatedgrad report: a run still training shows its curves; --watch follows it until it has finished") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "run", live = tmp.path / "live";
    {
        std::ofstream out(corpus);
        for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    }
    const Outcome train = run_app(tmp, "train --data " + corpus.string() +
                                           " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --steps 6 --eval-every 3 "
                                           "--out " + run.string());
    REQUIRE(train.code == 0);
    // The header says what train built without being asked.
    CHECK(train.out.find("attention g1 (sigmoid") != std::string::npos);
    CHECK(train.out.find("(g1 is train's default attention; --attn baseline trains the same model ungated)") !=
          std::string::npos);

    // What a run folder holds before its first checkpoint: its config and the first steps.
    fs::create_directories(live);
    fs::copy_file(run / "config.json", live / "config.json");
    const std::string log = read_file(run / "log.jsonl");
    size_t third = 0;
    for (int i = 0; i < 3; ++i) third = log.find('\n', third) + 1;
    std::ofstream(live / "log.jsonl") << log.substr(0, third);

    const Outcome once = run_app(tmp, "report " + live.string());
    INFO("stderr: " << once.err);
    REQUIRE(once.code == 0);
    CHECK(once.out.find("(1 run, 0 attention maps)") != std::string::npos);
    const std::string page = read_file(live / "report.html");
    CHECK(page.find("live: no checkpoint yet (still training?)") != std::string::npos);
    CHECK(page.find("gradient norm") != std::string::npos);
    CHECK(page.find("tokens/s") != std::string::npos);
    CHECK(page.find("http-equiv") == std::string::npos);  // no --watch: a page that stays as written

    // Watched: the page reloads while the run goes on, and stops once it has logged its last step and saved.
    fs::remove(live / "report.html");
    Child watch(tmp, "report " + live.string() + " --watch 1", "watch");
    CHECK(wait_until([&] { return read_file(watch.out).find("live at step 3") != std::string::npos; }));
    CHECK(read_file(live / "report.html").find("<meta http-equiv=\"refresh\" content=\"1\">") != std::string::npos);
    fs::copy_file(run / "log.jsonl", live / "log.jsonl.new");
    fs::rename(live / "log.jsonl.new", live / "log.jsonl");
    fs::copy_file(run / "model.safetensors", live / "model.safetensors.new");  // whole, as train writes it
    fs::rename(live / "model.safetensors.new", live / "model.safetensors");
    const Outcome watched = wait_app(watch);
    INFO("watch: " << watched.out << watched.err);
    CHECK(watched.code == 0);
    CHECK(watched.out.find("(1 run, 2 attention maps; live at step 6)") != std::string::npos);
    CHECK(watched.out.find("every run has finished: the page no longer reloads") != std::string::npos);
    const std::string done = read_file(live / "report.html");
    CHECK(done.find("http-equiv") == std::string::npos);
    CHECK(done.find("<p id=\"status\" hidden>") != std::string::npos);

    // Two runs that differ in one setting: the table marks it.
    const fs::path other = tmp.path / "other";
    REQUIRE(run_app(tmp, "train --data " + corpus.string() +
                             " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --steps 6 --eval-every 3 --lr 0.01 "
                             "--quiet --out " + other.string())
                .code == 0);
    REQUIRE(run_app(tmp, "report " + run.string() + " " + other.string() + " --batches 2 --out " +
                             (tmp.path / "two.html").string())
                .code == 0);
    const std::string two = read_file(tmp.path / "two.html");
    CHECK(two.find("<mark>lr 0.003</mark>") != std::string::npos);
    CHECK(two.find("<mark>lr 0.01</mark>") != std::string::npos);
    CHECK(count(two, "<mark>") == 2);  // only lr: not the run's id or folder

    // A folder without a log is not a run; one with a log is, checkpoint or not.
    const fs::path empty = tmp.path / "empty";
    fs::create_directories(empty);
    check_error(run_app(tmp, "report " + empty.string()), 1, "empty: not a run folder: no log.jsonl in it");
    check_error(run_app(tmp, "report " + live.string() + " --watch 0"), 2, "--watch");
}

TEST_CASE("report_html: models read on a prompt have no training section, their tokens as text in the page's data") {
    RunReport a = measured_run("qwen", 0);
    a.log = {};
    a.sink_data = "the prompt, 8 tokens";
    a.maps.token_texts = {"BOS", "H", "e", "l", "l", "o", "</script>", "!"};
    const std::string html = report_html({a});
    CHECK(html.find("<h2>Models</h2>") != std::string::npos);
    CHECK(html.find("<h2>Training</h2>") == std::string::npos);
    CHECK(html.find("This model has no sink layer here") != std::string::npos);
    CHECK(html.find("The prompt, token by token,") != std::string::npos);
    // A token cannot close the page's <script> early: its '<' is written \u003c in the data.
    CHECK(html.find("\"token_texts\":[\"BOS\",\"H\"") != std::string::npos);
    CHECK(count(html, "</script>") == 2);
    // A run with a log and a model without one do not share a page.
    RunReport run = measured_run("base", 0);
    CHECK_THROWS_WITH_AS(report_html({run, a}), "report_html: run 'qwen' has no log and 'base' has one",
                         std::invalid_argument);
}

TEST_CASE("gatedgrad report --prompt: the page of a Hugging Face model on a text, and what it refuses") {
    TempDir tmp;
    const std::string hf = " --hf tests/reference/hf/headwise", page = (tmp.path / "p.html").string();
    const Outcome o = run_app(tmp, "report" + hf + " --prompt 'the gate' --out " + page);
    INFO("stderr: " << o.err);
    REQUIRE(o.code == 0);
    CHECK(o.out.find("wrote " + page + " (headwise on the prompt, ") != std::string::npos);
    CHECK(o.out.find("no BOS: its own first token, --bos auto): 8 attention maps)") != std::string::npos);
    const std::string html = read_file(page);
    CHECK(html.find("\"token_texts\":[\"the\"") != std::string::npos);
    CHECK(html.find("2 layers, 4 query heads of 16, 2 KV heads, d_model 32, vocab 300") != std::string::npos);

    check_error(run_app(tmp, "report --prompt 'the gate' --out " + page), 2, "give --ckpt FILE");
    check_error(run_app(tmp, "report" + hf + " --prompt 'the gate'"), 2, "--prompt needs --out");
    check_error(run_app(tmp, "report " + tmp.path.string() + hf + " --prompt x --out " + page), 2,
                "not a RUN_DIR: give one or the other");
    check_error(run_app(tmp, "report" + hf + " --prompt x --watch 5 --out " + page), 2, "--watch");
    check_error(run_app(tmp, "report" + hf + " --prompt x --batches 2 --out " + page), 2, "--batches");
    check_error(run_app(tmp, "report" + hf + " --prompt the --out " + page), 2,
                "--prompt is 1 token with --bos auto, fewer than the 2 this command reads");
    check_error(run_app(tmp, "report" + hf + " --prompt 'the gate is open' --map-tokens 2 --out " + page), 2,
                "more than --map-tokens 2");
    check_error(run_app(tmp, "report" + hf + " --prompt x --bos always --out " + page), 2, "--bos always");
    check_error(run_app(tmp, "report" + hf), 2, "a run folder's page needs neither");
    check_error(run_app(tmp, "report"), 2, "give one or two RUN_DIR, or --prompt TEXT");
    check_error(run_app(tmp, "report " + tmp.path.string() + " --bos never"), 2, "--bos puts a token before --prompt");
}
