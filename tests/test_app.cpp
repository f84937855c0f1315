// test_app.cpp — the pictures of nn/analysis/plot.h (SVG structure, log axes, heat-map colours read
// back from the PNG, atomic files) and the gatedgrad command line end to end on a tiny
// corpus: every sub-command runs, and bad command lines and broken inputs give one line on
// stderr with exit code 2 (usage) or 1 (runtime).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

#include "gatedgrad.h"

using namespace gg;
using namespace gg::nn;
namespace fs = std::filesystem;

namespace {

Series line(const std::string& label, std::vector<double> x, std::vector<double> y) {
    Series s;
    s.label = label, s.x = std::move(x), s.y = std::move(y);
    return s;
}

BarSeries bars(const std::string& label, std::vector<double> values) {
    BarSeries s;
    s.label = label, s.values = std::move(values);
    return s;
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// A fresh folder under /tmp, removed at the end of the test.
struct TempDir {
    fs::path path = fs::temp_directory_path() / ("gg_test_app_" + std::to_string(getpid()));
    TempDir() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

// Every element that opens is closed: the checks a browser would choke on first.
void check_well_formed(const std::string& svg) {
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.size() >= 7);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(count(svg, "<text") == count(svg, "</text>"));
    CHECK(count(svg, "<svg") == 1);
}

}  // namespace

TEST_CASE("svg_line_chart: axes, legend, gaps and escaping") {
    const Series a = line("run <a> & b", {1, 2, 3, 4, 5}, {4.0, 3.0, NAN, 2.0, 1.5});
    Series v = line("validation", {2, 4}, {3.2, 2.1});
    v.points = true;
    Series faint = line("", {1, 5}, {4, 1});
    faint.color = "#123456", faint.opacity = 0.25;
    ChartOptions options;
    options.title = "loss < 5";
    options.x_label = "step";
    options.y_label = "loss";
    const std::string svg = svg_line_chart({a, v, faint}, options);
    check_well_formed(svg);
    CHECK(svg.find("loss &lt; 5") != std::string::npos);
    CHECK(svg.find("run &lt;a&gt; &amp; b") != std::string::npos);
    CHECK(count(svg, "<polyline") == 3);  // the NaN splits the first line in two
    CHECK(count(svg, "<circle") == 2 + 1);  // two points and their legend mark
    CHECK(svg.find("stroke=\"#123456\" stroke-opacity=\"0.25\"") != std::string::npos);
    CHECK(svg.find(">validation</text>") != std::string::npos);
    // y ticks are round numbers covering [1.5, 4]
    CHECK(svg.find(">1.5</text>") != std::string::npos);
    CHECK(svg.find(">4</text>") != std::string::npos);

    CHECK_THROWS_WITH_AS(svg_line_chart({line("bad", {1, 2}, {1})}, {}), doctest::Contains("'bad'"), std::invalid_argument);
    check_well_formed(svg_line_chart({}, {}));  // nothing to draw is still a picture
}

TEST_CASE("svg_line_chart: a log x axis puts ticks on decades") {
    ChartOptions options;
    options.log_x = true;
    const Series sweep = line("final loss", {1e-4, 3e-4, 1e-3, 3e-3, 1e-2}, {2.5, 2.1, 1.9, 2.0, 2.6});
    const std::string svg = svg_line_chart({sweep}, options);
    check_well_formed(svg);
    for (const char* tick : {">0.0001</text>", ">0.001</text>", ">0.01</text>"}) CHECK(svg.find(tick) != std::string::npos);
    // Equal ratios are equal distances: the three decade ticks are evenly spaced.
    std::vector<double> xs;
    for (const char* tick : {">0.0001</text>", ">0.001</text>", ">0.01</text>"}) {
        const size_t at = svg.rfind("<text x=\"", svg.find(tick));
        xs.push_back(std::stod(svg.substr(at + 9)));
    }
    CHECK(xs[2] - xs[1] == doctest::Approx(xs[1] - xs[0]).epsilon(0.01));
    CHECK_THROWS_AS(svg_line_chart({line("lr", {0, 1}, {1, 2})}, options), std::invalid_argument);
}

TEST_CASE("svg_bar_chart: one bar per series in each group, and the threshold line") {
    ChartOptions options;
    options.reference_y = 0.3;
    options.reference_label = "threshold";
    const std::string svg =
        svg_bar_chart({"layer 0", "layer 1", "layer 2"}, {bars("baseline", {0.6, 0.5, 0.4}), bars("G1", {0.05, 0.04, 0.0})}, options);
    check_well_formed(svg);
    CHECK(count(svg, "</rect>") == 6);  // bars carry a <title> tooltip; legend swatches do not
    CHECK(svg.find(">layer 2</text>") != std::string::npos);
    CHECK(svg.find("stroke-dasharray") != std::string::npos);
    CHECK(svg.find(">threshold</text>") != std::string::npos);
    CHECK_THROWS_AS(svg_bar_chart({"layer 0"}, {bars("x", {1, 2})}, {}), std::invalid_argument);
}

TEST_CASE("write_heatmap_png: cells of scale pixels, 0 white and 1 dark") {
    TempDir tmp;
    const std::string path = (tmp.path / "map.png").string();
    const Tensor m = from_vector(std::vector<double>{0, 0.5, 1, 1, 0.25, 0}, {2, 3});
    write_heatmap_png(path, m, 4);
    int w = 0, h = 0, channels = 0;
    unsigned char* pixels = stbi_load(path.c_str(), &w, &h, &channels, 3);
    REQUIRE(pixels != nullptr);
    CHECK(w == 12);
    CHECK(h == 8);
    auto at = [&](int x, int y, int k) { return int(pixels[(y * w + x) * 3 + k]); };
    CHECK((at(0, 0, 0) == 255 && at(0, 0, 1) == 255 && at(0, 0, 2) == 255));  // cell (0, 0) = 0
    CHECK((at(11, 3, 0) == 8 && at(11, 3, 1) == 48 && at(11, 3, 2) == 107));   // cell (0, 2) = 1, its last pixel
    CHECK(at(4, 0, 0) < at(4, 4, 0));  // 0.5 is darker than 0.25
    CHECK(at(4, 4, 0) < 255);
    stbi_image_free(pixels);
    CHECK_THROWS_AS(write_heatmap_png(path, zeros({3}), 4), std::invalid_argument);
    CHECK_THROWS_AS(write_heatmap_png(path, m, 0), std::invalid_argument);
}

TEST_CASE("write_text_file replaces atomically and names the path when it cannot") {
    TempDir tmp;
    const fs::path file = tmp.path / "a.txt";
    write_text_file(file.string(), "first");
    write_text_file(file.string(), "second");
    CHECK(read_file(file) == "second");
    CHECK(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator()) == 1);  // no temp file left
    const std::string missing = (tmp.path / "no" / "such" / "dir.txt").string();
    CHECK_THROWS_WITH_AS(write_text_file(missing, "x"), doctest::Contains(missing.c_str()), std::runtime_error);
}

TEST_CASE("csv_table and smooth") {
    CHECK(csv_table({"layer", "share"}, {{0, 0.5}, {1, 0.25}}) == "layer,share\n0,0.5\n1,0.25\n");
    CHECK_THROWS_AS(csv_table({"a"}, {{1, 2}}), std::invalid_argument);
    const std::vector<double> s = smooth({2, 2, NAN, 2}, 0.9);
    CHECK(s[0] == doctest::Approx(2));  // bias correction: a constant stays itself from the start
    CHECK(std::isnan(s[2]));
    CHECK(s[3] == doctest::Approx(2));
}

// ---------------------------------------------------------------- the command line

namespace {

// The app sits next to this test in the build tree: <build>/apps/gatedgrad.
fs::path app_path() { return fs::canonical("/proc/self/exe").parent_path().parent_path() / "apps" / "gatedgrad"; }

struct Outcome {
    int code;
    std::string out, err;
};

Outcome run_app(const TempDir& tmp, const std::string& args) {
    const fs::path out = tmp.path / "stdout.txt", err = tmp.path / "stderr.txt";
    const std::string command = "OMP_NUM_THREADS=1 " + app_path().string() + " " + args + " >" + out.string() + " 2>" + err.string();
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// A failure is exactly one line on stderr, starting "gatedgrad: ".
void check_error(const Outcome& o, int code, const std::string& mentions) {
    INFO("stderr: " << o.err);
    CHECK(o.code == code);
    CHECK(o.err.rfind("gatedgrad: ", 0) == 0);
    CHECK(count(o.err, "\n") == 1);
    CHECK(o.err.find(mentions) != std::string::npos);
}

}  // namespace

TEST_CASE("gatedgrad: every sub-command on a tiny corpus, and its error exits") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "run", ckpt = run / "model.safetensors";
    {
        std::ofstream out(corpus);
        for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    }
    const std::string tiny = " --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16";

    const Outcome help = run_app(tmp, "train --help");
    CHECK(help.code == 0);
    CHECK(help.out.find("--attn") != std::string::npos);

    const Outcome train = run_app(tmp, "train" + tiny + " --steps 3 --eval-every 2 --attn g1 --out " + run.string());
    INFO("train stdout: " << train.out << "\nstderr: " << train.err);
    REQUIRE(train.code == 0);
    CHECK(train.out.find("parameters") != std::string::npos);
    CHECK(train.out.find("unigram baseline") != std::string::npos);
    CHECK(train.out.find("final validation loss") != std::string::npos);
    for (const char* name : {"model.safetensors", "log.jsonl", "config.json"}) CHECK(fs::exists(run / name));

    const Outcome resumed = run_app(tmp, "train --resume --steps 4 --quiet --out " + run.string());
    CHECK(resumed.code == 0);
    CHECK(count(read_file(run / "log.jsonl"), "\n") == 4);  // three steps, then one more

    const Outcome eval = run_app(tmp, "eval --ckpt " + ckpt.string() + " --seq-len 32 --rope-scaling yarn");
    CHECK(eval.code == 0);
    CHECK(eval.out.find("perplexity") != std::string::npos);
    CHECK(eval.out.find("yarn x2") != std::string::npos);

    const Outcome sample = run_app(tmp, "sample --ckpt " + ckpt.string() + " --prompt Fortune --tokens 8 --seed 3");
    CHECK(sample.code == 0);
    CHECK(sample.out.rfind("Fortune", 0) == 0);

    const fs::path png = tmp.path / "png";
    const Outcome sink = run_app(tmp, "sink --ckpt " + ckpt.string() + " --batches 2 --png " + png.string() + " --json " +
                                          (png / "sink.json").string());
    CHECK(sink.code == 0);
    CHECK(sink.out.find("sink layers") != std::string::npos);
    for (const char* name : {"layer0_head0.png", "layer0_head1.png", "first_token_share.svg", "first_token_share.csv"})
        CHECK(fs::exists(png / name));
    CHECK(read_file(png / "sink.json").find("\"sink_layers\"") != std::string::npos);

    const fs::path svg = tmp.path / "loss.svg";
    const Outcome plot = run_app(tmp, "plot --out " + svg.string() + " " + (run / "log.jsonl").string() + " --labels g1");
    CHECK(plot.code == 0);
    CHECK(read_file(svg).find("g1 validation") != std::string::npos);

    // Bad command lines: exit code 2.
    check_error(run_app(tmp, "train --bogus --out " + run.string()), 2, "--bogus");
    check_error(run_app(tmp, "train --attn g9 --out " + run.string()), 2, "g9");
    check_error(run_app(tmp, "train --steps many --out " + run.string()), 2, "many");
    check_error(run_app(tmp, "train" + tiny), 2, "--out");
    check_error(run_app(tmp, "train" + tiny + " --steps 10 --warmup 10 --out " + run.string()), 2, "warmup");
    check_error(run_app(tmp, ""), 2, "no command");
    check_error(run_app(tmp, "trian"), 2, "'trian'");
    check_error(run_app(tmp, "sink --ckpt " + ckpt.string() + " --threshold 2"), 2, "between 0 and 1");
    check_error(run_app(tmp, "plot --out " + svg.string() + " a.jsonl --labels a,b"), 2, "labels");

    // Runtime failures: exit code 1.
    check_error(run_app(tmp, "train --data /no/such/corpus --out " + (tmp.path / "x").string()), 1, "/no/such/corpus");
    const fs::path truncated = tmp.path / "truncated.safetensors";
    {
        const std::string bytes = read_file(ckpt);
        std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    }
    check_error(run_app(tmp, "eval --ckpt " + truncated.string()), 1, truncated.string());
    check_error(run_app(tmp, "sink --ckpt " + (tmp.path / "missing.safetensors").string()), 1, "missing.safetensors");
    check_error(run_app(tmp, "plot --out " + svg.string() + " " + corpus.string()), 1, "corpus.txt:1");
}

TEST_CASE("gatedgrad: absurd numbers, hostile files and an earlier run are refused, on one line") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "run", ckpt = run / "model.safetensors";
    {
        std::ofstream out(corpus);
        for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    }
    const std::string tiny = " --data " + corpus.string() + " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16";

    // Sizes: each was a crash, a silent wrap or a huge allocation.
    check_error(run_app(tmp, "train --out " + run.string() + " --d-model 4611686018427387904 --heads 1 --steps 1"), 2,
                "between 1 and 65536");
    check_error(run_app(tmp, "train" + tiny + " --steps 99999999999999999999 --out " + run.string()), 2, "99999999999999999999");
    check_error(run_app(tmp, "train" + tiny + " --seed -1 --out " + run.string()), 2, "-1");
    check_error(run_app(tmp, "train --layers 1024 --d-model 65536 --heads 1 --out " + run.string()), 2,
                "asks for too much memory");
    check_error(run_app(tmp, "train --batch 65536 --seq-len 1048576 --out " + run.string()), 2,
                "batch 65536 × seq_len 1048576");
    const fs::path config = tmp.path / "config.json";
    std::ofstream(config) << R"({"log_every": -1})";
    check_error(run_app(tmp, "train --config " + config.string() + " --out " + run.string()), 2, "log_every -1");
    check_error(run_app(tmp, "train --config /dev/zero --out " + run.string()), 1, "not a regular file");
    CHECK_FALSE(fs::exists(run));  // nothing was started

    // A run, then the same folder again: refused unless resumed or forced.
    REQUIRE(run_app(tmp, "train" + tiny + " --steps 2 --quiet --out " + run.string()).code == 0);
    check_error(run_app(tmp, "train" + tiny + " --steps 2 --out " + run.string()), 2, "already holds a run");
    check_error(run_app(tmp, "train" + tiny + " --force --resume --out " + run.string()), 2, "--resume");
    const Outcome forced = run_app(tmp, "train" + tiny + " --steps 3 --quiet --force --out " + run.string());
    CHECK(forced.code == 0);
    CHECK(count(read_file(run / "log.jsonl"), "\n") == 3);  // a new run, not steps 1-2 then 1-3

    check_error(run_app(tmp, "eval --ckpt " + ckpt.string() + " --rope-scaling yarn --rope-factor inf"), 2, "inf");
    check_error(run_app(tmp, "sample --ckpt " + ckpt.string() + " --temperature inf"), 2, "inf");
    check_error(run_app(tmp, "sample --ckpt " + ckpt.string() + " --tokens 10 --seed 99999999999999999999"), 2, "seed");
    check_error(run_app(tmp, "plot --out " + (tmp.path / "x.svg").string() + " /dev/zero"), 1, "not a regular file");
    const fs::path one_line = tmp.path / "long.jsonl";
    std::ofstream(one_line) << std::string(100000, '{');
    check_error(run_app(tmp, "plot --out " + (tmp.path / "x.svg").string() + " " + one_line.string()), 1, "longer than 4096");

    // Learned positions end at max_len: asking for more is an error, not a short answer.
    const fs::path learned = tmp.path / "learned";
    REQUIRE(run_app(tmp, "train" + tiny + " --positions learned --steps 1 --quiet --out " + learned.string()).code == 0);
    const std::string learned_ckpt = (learned / "model.safetensors").string();
    check_error(run_app(tmp, "sample --ckpt " + learned_ckpt + " --prompt abc --tokens 40"), 2, "ask for at most 13 tokens");
    CHECK(run_app(tmp, "sample --ckpt " + learned_ckpt + " --prompt abc --tokens 13").code == 0);

    // Hand-made checkpoints: an 8-byte header length, then the header.
    const auto write_header = [](const fs::path& path, const std::string& header) {
        std::string bytes(8, '\0');
        for (int i = 0; i < 8; ++i) bytes[i] = char((header.size() >> (8 * i)) & 0xff);
        std::ofstream(path, std::ios::binary) << bytes << header;
    };
    // A checkpoint whose header nests 100k arrays: a short error, not a stack overflow.
    const fs::path nested = tmp.path / "nested.safetensors";
    write_header(nested, R"({"w":{"dtype":"F32","shape":)" + std::string(100000, '[') + std::string(100000, ']') +
                             R"(,"data_offsets":[0,0]}})");
    for (const char* command : {"eval", "sample", "sink"}) {
        const Outcome o = run_app(tmp, std::string(command) + " --ckpt " + nested.string());
        check_error(o, 1, "nested deeper than 64 levels");
        CHECK(o.err.size() < 300);
    }
    // Bytes from a header that are not UTF-8, or are terminal escapes, reach stderr escaped.
    const fs::path raw = tmp.path / "raw.safetensors";
    write_header(raw, "{\"w\xff\xfe\":{\"dtype\":\"\x1b[2J\",\"shape\":[1],\"data_offsets\":[0,4]}}");
    const Outcome escaped = run_app(tmp, "eval --ckpt " + raw.string());
    check_error(escaped, 1, "\\x");
    const std::string line = escaped.err.substr(0, escaped.err.find('\n'));
    CHECK(std::all_of(line.begin(), line.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
}
