// test_app.cpp — the pictures of nn/analysis/plot.h (SVG structure, log axes, heat-map colours read
// back from the PNG, atomic files) and the gatedgrad command line end to end on a tiny
// corpus: every sub-command runs, and bad command lines and broken inputs give one line on
// stderr with exit code 2 (usage) or 1 (runtime).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
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
#include "tests/app_check.h"

using namespace gg;
using namespace gg::nn;
using namespace gg::testing;
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

TEST_CASE("svg_line_chart: values at the ends of double's range (±1e308, subnormals) are drawn inside the picture") {
    const double tiny = 4.9406564584124654e-324;  // the smallest subnormal
    for (const std::vector<double>& ys : std::vector<std::vector<double>>{
             {-1e308, 1e308}, {1e308, 1e308}, {-1.7976931348623157e308, 1.7976931348623157e308}, {tiny, tiny}, {0, tiny},
             {tiny, 2 * tiny, 3 * tiny}, {1e-305, 2e-305}}) {
        CAPTURE(ys.front());
        CAPTURE(ys.back());
        std::vector<double> xs(ys.size());
        for (size_t i = 0; i < xs.size(); ++i) xs[i] = double(i + 1);
        const ChartOptions options;
        const std::string svg = svg_line_chart({line("extreme", xs, ys)}, options);
        check_well_formed(svg);
        CHECK(svg.find("nan") == std::string::npos);
        CHECK(svg.find("inf") == std::string::npos);
        const size_t at = svg.find("points=\"");
        REQUIRE(at != std::string::npos);
        std::istringstream points(svg.substr(at + 8, svg.find('"', at + 8) - at - 8));
        size_t n = 0;
        for (double x = 0, y = 0; points >> x && points.ignore(1) && points >> y; ++n) {
            CHECK((x >= 0 && x <= options.width));
            CHECK((y >= 0 && y <= options.height));
        }
        CHECK(n == ys.size());
    }
}

TEST_CASE("svg_line_chart: a log x axis spans the data, with the sweep's values as ticks") {
    ChartOptions options;
    options.log_x = true;
    const Series sweep = line("final loss", {1e-4, 3e-4, 1e-3, 3e-3, 1e-2}, {2.5, 2.1, 1.9, 2.0, 2.6});
    const std::string svg = svg_line_chart({sweep}, options);
    check_well_formed(svg);
    for (const char* tick : {">0.0001</text>", ">0.0003</text>", ">0.001</text>", ">0.01</text>"})
        CHECK(svg.find(tick) != std::string::npos);
    // Equal ratios are equal distances: the three decade ticks are evenly spaced.
    std::vector<double> xs;
    for (const char* tick : {">0.0001</text>", ">0.001</text>", ">0.01</text>"}) {
        const size_t at = svg.rfind("<text x=\"", svg.find(tick));
        xs.push_back(std::stod(svg.substr(at + 9)));
    }
    CHECK(xs[2] - xs[1] == doctest::Approx(xs[1] - xs[0]).epsilon(0.01));
    CHECK_THROWS_AS(svg_line_chart({line("lr", {0, 1}, {1, 2})}, options), std::invalid_argument);

    // Contexts 64 to 512: the axis is theirs, not the decades 10 to 1000 around them.
    const std::string contexts = svg_line_chart({line("G1", {64, 128, 256, 512}, {2.1, 2.2, 2.4, 2.9})}, options);
    for (const char* tick : {">64</text>", ">128</text>", ">256</text>", ">512</text>"})
        CHECK(contexts.find(tick) != std::string::npos);
    CHECK(contexts.find(">10</text>") == std::string::npos);
    CHECK(contexts.find(">1000</text>") == std::string::npos);
}

TEST_CASE("charts: the legend stands right of the data, long titles wrap, error bars") {
    ChartOptions options;
    options.title = "A title long enough that it could never fit on one line of a chart this narrow, so it wraps";
    options.width = 480;
    Series a = line("a series with a long label", {1, 2, 3}, {1, 2, 3});
    a.y_error = {0.5, 0.5, 0.5};
    const std::string svg = svg_line_chart({a}, options);
    check_well_formed(svg);
    CHECK(count(svg, "font-size=\"15\"") >= 2);  // the title took two lines or more
    // The legend's box starts right of every data point.
    const double legend_x = std::stod(svg.substr(svg.find("x=\"", svg.rfind("<rect", svg.find("stroke=\"#bbb\""))) + 3));
    const size_t points = svg.find("points=\"") + 8;
    const std::string coordinates = svg.substr(points, svg.find('"', points) - points);
    std::istringstream pairs(coordinates);
    for (std::string pair; pairs >> pair;) CHECK(std::stod(pair) < legend_x);
    CHECK(count(svg, "<path") == 3);  // an error bar at each point
    CHECK(svg.find(">0.5</text>") != std::string::npos);  // the axis covers 1 - 0.5 ...
    CHECK(svg.find(">3.5</text>") != std::string::npos);  // ... to 3 + 0.5
    CHECK_THROWS_AS(svg_line_chart({[&] { Series b = a; b.y_error = {1}; return b; }()}, options), std::invalid_argument);

    BarSeries delta = bars("delta", {0.1, -0.2});
    delta.errors = {0.05, 0.3};
    const std::string bar_svg = svg_bar_chart({"G1", "G2"}, {delta}, {});
    check_well_formed(bar_svg);
    CHECK(count(bar_svg, "<path") == 2);
    CHECK(bar_svg.find(">-0.5</text>") != std::string::npos);  // the axis covers -0.2 - 0.3
}

TEST_CASE("write_heatmap_png: cells of scale pixels, 0 white and 1 dark, framed by axes and a colour bar") {
    TempDir tmp;
    const std::string path = (tmp.path / "map.png").string();
    const Tensor m = from_vector(std::vector<double>{0, 0.5, 1, 1, 0.25, 0}, {2, 3});
    HeatmapOptions options;
    options.title = "layer 0, head 1";
    const HeatmapLayout layout = write_heatmap_png(path, m, 4, options);
    int w = 0, h = 0, channels = 0;
    unsigned char* pixels = stbi_load(path.c_str(), &w, &h, &channels, 3);
    REQUIRE(pixels != nullptr);
    CHECK(w == layout.width);
    CHECK(h == layout.height);
    CHECK(layout.map_x > 0);
    CHECK(layout.map_y > 0);
    auto at = [&](int x, int y, int k) { return int(pixels[((layout.map_y + y) * w + layout.map_x + x) * 3 + k]); };
    CHECK((at(0, 0, 0) == 255 && at(0, 0, 1) == 255 && at(0, 0, 2) == 255));  // cell (0, 0) = 0
    CHECK((at(11, 3, 0) == 8 && at(11, 3, 1) == 48 && at(11, 3, 2) == 107));   // cell (0, 2) = 1, its last pixel
    CHECK(at(4, 0, 0) < at(4, 4, 0));  // 0.5 is darker than 0.25
    CHECK(at(4, 4, 0) < 255);
    CHECK(at(-1, 0, 0) == 0);  // the frame
    // Text above the map (the title) and left of it (ticks, the axis label) is drawn in black.
    auto black_in = [&](int x0, int y0, int x1, int y1) {
        for (int y = y0; y < y1; ++y)
            for (int x = x0; x < x1; ++x)
                if (pixels[(y * w + x) * 3] == 0) return true;
        return false;
    };
    CHECK(black_in(0, 0, w, layout.map_y - 2));
    CHECK(black_in(0, 0, layout.map_x - 2, h));
    CHECK(black_in(layout.map_x + 12 + 2, 0, w, h));  // the colour bar and its labels
    stbi_image_free(pixels);
    CHECK_THROWS_AS(write_heatmap_png(path, zeros({3}), 4), std::invalid_argument);
    CHECK_THROWS_AS(write_heatmap_png(path, m, 0), std::invalid_argument);
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


TEST_CASE("read_training_log: steps, learning rate, validation, probes of a deep model; what is not a log") {
    TempDir tmp;
    const fs::path path = tmp.path / "log.jsonl";
    nlohmann::json probe = {{"step", 2}, {"loss", 4.5}, {"lr", 0.002}, {"val_loss", 4.75}, {"max_abs_hidden", 3.5},
                            {"max_output_logit", 9}, {"mean_log_z", nullptr}};
    for (const char* field : {"max_attn_logit", "mean_attn_logit", "min_attn_entropy", "gate_mean"})
        probe[field] = std::vector<double>(64, 0.123456789012345);  // 64 layers: a line of some 8 KB
    probe["min_attn_entropy"][3] = nullptr;                          // how JSON writes a NaN
    std::ofstream(path) << "{\"step\": 1, \"loss\": 5.5}\n\n" << probe.dump() << "\n";
    const TrainingLog log = read_training_log(path.string());
    CHECK(log.step == std::vector<double>{1, 2});
    CHECK(log.loss == std::vector<double>{5.5, 4.5});
    REQUIRE(log.lr.size() == 2);
    CHECK(std::isnan(log.lr[0]));  // a line without one
    CHECK(log.lr[1] == 0.002);
    CHECK(log.val_step == std::vector<double>{2});
    CHECK(log.val_loss == std::vector<double>{4.75});
    REQUIRE(log.probes.size() == 1);
    CHECK(log.probe_step == std::vector<double>{2});
    CHECK(log.probes[0].max_attn_logit.size() == 64);
    CHECK(std::isnan(log.probes[0].min_attn_entropy[3]));
    CHECK(std::isnan(log.probes[0].mean_log_z));
    CHECK(log.probes[0].max_abs_hidden == 3.5);
    CHECK(log.warning.empty());

    // A write cut short: the last line torn, without its newline, is left out with a warning.
    std::ofstream(path) << "{\"step\": 1, \"loss\": 5.5}\n{\"step\": 2, \"loss\": 5}\n{\"step\": 3, \"lo";
    const TrainingLog torn = read_training_log(path.string());
    CHECK(torn.step == std::vector<double>{1, 2});
    CHECK(torn.warning == path.string() + ":3: the last line is torn (15 bytes, no newline, not a log line): left out");
    std::ofstream(path) << "{\"step\": 1, \"loss\": 5.5}\n{\"step\": 2, \"loss\": 5}";  // whole, only the newline missing
    CHECK(read_training_log(path.string()).step == std::vector<double>{1, 2});
    CHECK(read_training_log(path.string()).warning.empty());

    const auto fails = [&](const std::string& text, const std::string& why) {
        std::ofstream(path) << text;
        CHECK_THROWS_WITH_AS(read_training_log(path.string()), doctest::Contains(why.c_str()), std::runtime_error);
    };
    fails("{\"step\": 1, \"loss\": 5.5}\n{\"step\": 2, \"loss\": 5, \"max_attn_logit\": [\"x\"]}\n",
          "log.jsonl:2: a stability probe that is not numbers");
    fails("{\"step\": 1}\n", "log.jsonl:1: not a training log line");
    fails("{\"step\": 1, \"loss\": 5.5}\n{\"step\": 2, \"lo\n{\"step\": 3, \"loss\": 5}\n", "log.jsonl:2: not a training log line");
    fails(std::string(size_t(1) << 21, 'x'), "log.jsonl:1: a line longer than");
    fails("\n\n", "no training steps");
    CHECK_THROWS_WITH_AS(read_training_log(tmp.path.string()), doctest::Contains("not a regular file"), std::runtime_error);
}

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

    const Outcome train =
        run_app(tmp, "train" + tiny + " --steps 3 --eval-every 2 --attn g1 --z-loss 0.001 --out " + run.string());
    INFO("train stdout: " << train.out << "\nstderr: " << train.err);
    REQUIRE(train.code == 0);
    CHECK(train.out.find("parameters") != std::string::npos);
    // Each setting away from its default that the lines above it do not show.
    CHECK(train.out.find("\nother     --z-loss 0.001\ndata      ") != std::string::npos);
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

    // The page of one run (tests/test_report.cpp loads it in a browser), into the run folder by default.
    const Outcome report = run_app(tmp, "report " + run.string() + " --batches 2");
    CHECK(report.code == 0);
    CHECK(report.out.find("(1 run, 2 attention maps)") != std::string::npos);  // 1 layer of 2 heads
    CHECK(read_file(run / "report.html").find("<p id=\"status\" hidden>") != std::string::npos);
    const fs::path broken = tmp.path / "broken";
    fs::create_directories(broken);
    fs::copy_file(ckpt, broken / "model.safetensors");
    std::ofstream(broken / "log.jsonl") << "{\"step\": 1, \"loss\": 5.5}\n{not json\n";

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
    check_error(run_app(tmp, "report " + run.string() + " " + run.string() + " " + broken.string()), 2, "one or two run folders, got 3");
    check_error(run_app(tmp, "report " + run.string() + " --map-tokens 1"), 2, "--map-tokens");

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
    check_error(run_app(tmp, "report " + (tmp.path / "nowhere").string()), 1, "nowhere: not a run folder");
    check_error(run_app(tmp, "report " + run.string() + " " + png.string()), 1, "not a run folder: no log.jsonl in it");
    check_error(run_app(tmp, "report " + broken.string()), 1, "log.jsonl:2: not a training log line");
}

TEST_CASE("gatedgrad: your own text, absolute data paths, any-case names, typo hints, extended runs") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path run = tmp.path / "run", ckpt = run / "model.safetensors";
    {
        std::ofstream out(tmp.path / "input.txt");  // one document: no "%" lines
        for (int i = 0; i < 200; ++i) out << "Line " << i << " of a plain text file, the nanoGPT way.\n";
    }
    const std::string tiny = " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --steps 3 --eval-every 3";

    // One file, named relative to the folder the command runs in: split at bytes, saved absolute.
    const Outcome train = run_app(tmp, "train --data input.txt --attn G1 --out " + run.string() + tiny, tmp.path);
    INFO("train stdout: " << train.out << "\nstderr: " << train.err);
    REQUIRE(train.code == 0);
    CHECK(train.out.find("1 document of 9491 bytes, the last 10% (950 bytes) to validation") != std::string::npos);
    CHECK(train.out.find("attention g1") != std::string::npos);
    CHECK(train.out.find("other     ") == std::string::npos);  // every setting it changed is shown above
    const auto config = nlohmann::json::parse(read_file(run / "config.json"));
    CHECK(config["data"] == nlohmann::json::array({(tmp.path / "input.txt").string()}));
    CHECK(config["split"] == "auto");
    // eval and sink from any folder find it.
    CHECK(run_app(tmp, "eval --ckpt " + ckpt.string() + " --rope-scaling YaRN --seq-len 32", "/").code == 0);

    // A folder of .txt files (two documents: also a byte split).
    fs::create_directories(tmp.path / "texts");
    std::ofstream(tmp.path / "texts" / "a.txt") << read_file(tmp.path / "input.txt");
    std::ofstream(tmp.path / "texts" / "b.md") << "# Notes\n\nMore text to learn from.\n";
    const Outcome folder = run_app(tmp, "train --data " + (tmp.path / "texts").string() + " --out " +
                                            (tmp.path / "run2").string() + tiny);
    CHECK(folder.code == 0);
    CHECK(folder.out.find("2 documents of ") != std::string::npos);

    // Extending a finished run: the learning rate stays where the run left it (min_lr).
    const Outcome extended = run_app(tmp, "train --resume --steps 6 --quiet --out " + run.string());
    INFO("extended stdout: " << extended.out << "\nstderr: " << extended.err);
    CHECK(extended.code == 0);
    CHECK(extended.out.find("planned for 3 steps and now has 6: from step 4 the learning rate stays at 3.00e-04, where "
                            "the first plan left it, through step 6") != std::string::npos);
    CHECK(extended.out.find("changed for the rest of the run: --steps 3 → 6") != std::string::npos);
    std::istringstream log(read_file(run / "log.jsonl"));
    std::string line;
    for (int step = 1; std::getline(log, line); ++step)
        if (step > 3) CHECK(nlohmann::json::parse(line)["lr"].get<double>() == doctest::Approx(3e-4));

    // Defaults and the data rules in --help.
    const Outcome help = run_app(tmp, "train --help");
    CHECK(help.out.find("training steps") != std::string::npos);
    CHECK(help.out.find("(default 300; tiny 600, small 2000)") != std::string::npos);
    CHECK(help.out.find("(default g1)") != std::string::npos);
    CHECK(help.out.find("--split bytes the last F of the text") != std::string::npos);
    CHECK(help.out.find("--resume with another --steps") != std::string::npos);

    // Typos get a suggestion; a file that is not a checkpoint says so.
    check_error(run_app(tmp, "train --atn g1 --out " + run.string()), 2, "did you mean --attn?");
    check_error(run_app(tmp, "train --stpes 3 --out " + run.string()), 2, "did you mean --steps?");
    check_error(run_app(tmp, "eval --ckpt " + ckpt.string() + " --seq-lne 32"), 2, "did you mean --seq-len?");
    check_error(run_app(tmp, "trian --out x"), 2, "did you mean train?");
    check_error(run_app(tmp, "train --bogus --out " + run.string()), 2, "not expected: --bogus (see --help)");
    check_error(run_app(tmp, "eval --ckpt " + (run / "config.json").string()), 1,
                (run / "config.json").string() + ": not a safetensors file");

    // A checkpoint from before paths were saved absolute, evaluated from elsewhere: a hint.
    const fs::path old_run = tmp.path / "old";
    REQUIRE(run_app(tmp, "train --data texts --out old" + tiny, tmp.path).code == 0);
    {
        // What older versions saved: the path as typed.
        Metadata metadata;
        NamedTensors tensors = load_tensors((old_run / "model.safetensors").string(), &metadata);
        auto train_config = nlohmann::json::parse(metadata["train_config"]);
        train_config["data"] = nlohmann::json::array({"texts"});
        metadata["train_config"] = train_config.dump();
        save_tensors((old_run / "model.safetensors").string(), tensors, metadata);
    }
    check_error(run_app(tmp, "sink --ckpt " + (old_run / "model.safetensors").string(), "/"), 1,
                "the checkpoint names it relative to the folder it was trained in");
    CHECK(run_app(tmp, "sink --ckpt " + (old_run / "model.safetensors").string(), tmp.path).code == 0);
}

TEST_CASE("gatedgrad --device: cuda runs the CPU's numbers on the emulated device; without a GPU it is one line") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt";
    {
        std::ofstream out(corpus);
        for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    }
    const std::string tiny = " --data " + corpus.string() +
                             " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --steps 3 --eval-every 3";
    const auto final_loss = [](const Outcome& o) {
        const size_t at = o.out.find("final validation loss ");
        return at == std::string::npos ? std::string("none") : o.out.substr(at, 32);
    };
    const fs::path on_cpu = tmp.path / "cpu", on_cuda = tmp.path / "cuda";
    const Outcome cpu = run_app(tmp, "train" + tiny + " --out " + on_cpu.string());
    REQUIRE(cpu.code == 0);
    const std::string greedy = " --prompt Fortune --tokens 12 --temperature 0";
    const Outcome cpu_sample = run_app(tmp, "sample --ckpt " + (on_cpu / "model.safetensors").string() + greedy);

    // The emulated CUDA device (GATEDGRAD_CUDA=emulator, inherited by the app).
    setenv("GATEDGRAD_CUDA", "emulator", 1);
    const Outcome cuda = run_app(tmp, "train" + tiny + " --device CUDA --out " + on_cuda.string());
    const Outcome cuda_sample =
        run_app(tmp, "sample --ckpt " + (on_cpu / "model.safetensors").string() + greedy + " --device cuda");
    const Outcome cuda_eval = run_app(tmp, "eval --ckpt " + (on_cuda / "model.safetensors").string() + " --device cuda");
    const Outcome cuda_sink =
        run_app(tmp, "sink --ckpt " + (on_cuda / "model.safetensors").string() + " --batches 1 --device cuda");
    unsetenv("GATEDGRAD_CUDA");
    INFO("cuda train stdout: " << cuda.out << "\nstderr: " << cuda.err);
    REQUIRE(cuda.code == 0);
    CHECK(cuda.out.find("device    cuda (emulator)") != std::string::npos);
    CHECK(final_loss(cuda) == final_loss(cpu));  // the same 4 decimals
    CHECK(cuda_sample.code == 0);
    CHECK(cuda_sample.out == cpu_sample.out);
    CHECK(cuda_eval.code == 0);
    CHECK(cuda_eval.out.find("perplexity") != std::string::npos);
    CHECK(cuda_sink.code == 0);
    CHECK(cuda_sink.out.find("sink layers") != std::string::npos);

    check_error(run_app(tmp, "train --device tpu --out " + (tmp.path / "x").string()), 2, "tpu");
    if (!gg::device_available(gg::Device::CUDA)) {  // a machine without a GPU, as CI's
        check_error(run_app(tmp, "train" + tiny + " --device cuda --out " + (tmp.path / "y").string()), 1,
                    "no CUDA device");
        CHECK_FALSE(fs::exists(tmp.path / "y" / "model.safetensors"));
        const Outcome fallback = run_app(tmp, "train" + tiny + " --device auto --out " + (tmp.path / "z").string());
        CHECK(fallback.code == 0);
        CHECK(fallback.out.find("device    cpu") != std::string::npos);
    }
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
    std::ofstream(one_line) << std::string(size_t(2) << 20, '{');
    check_error(run_app(tmp, "plot --out " + (tmp.path / "x.svg").string() + " " + one_line.string()), 1,
                "longer than 1048576");

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
