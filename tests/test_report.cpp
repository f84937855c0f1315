// test_report.cpp — `gatedgrad report` in a real browser. Two tiny runs (a baseline and G1,
// both with stability probes) go on one page, which headless Chromium loads; what the page's
// script drew is read back from the DOM Chromium dumps (the hidden status line, one thumbnail per
// layer and head, the gate column of the gated run, the sink tables), and from a screenshot
// kept in the build folder: <build>/tests/report/report.png, beside the page itself.
// Control: the same page with its data broken must show the error, so a page that never ran
// its script cannot pass for one that did. A page of one sink-logit model, whose attention sits
// in the slot, must show the slot in its sink table, chart and maps. The page of a model reading
// a prompt (report --prompt), on the tests' Hugging Face folders and on a checkpoint, must show
// the prompt's tokens as text, escaped, one box each, and each gated model's gate column.
// Without chromium on PATH the suite exits 77, which meson counts as skipped, not passed
// (tools/setup installs it).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

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

using namespace gg::testing;
namespace fs = std::filesystem;

namespace {

bool have_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

// The page as Chromium leaves it once its scripts have run, without the <script> elements
// (their source holds the very words the checks look for). `fragment`: "#layer=1&head=1".
std::string rendered_dom(const TempDir& tmp, const fs::path& page, const std::string& name,
                         const std::string& fragment = "") {
    const fs::path dom = tmp.path / (name + ".dom.html"), log = tmp.path / (name + ".chromium.log");
    const std::string command = "timeout 120 chromium --headless --disable-gpu --no-sandbox --user-data-dir=" +
                                (tmp.path / ("profile-" + name)).string() + " --dump-dom file://" +
                                fs::absolute(page).string() + fragment + " >" + dom.string() + " 2>" + log.string();
    const int status = std::system(command.c_str());
    INFO("chromium: " << read_file(log));
    REQUIRE(status == 0);
    std::string text = read_file(dom);
    for (size_t at; (at = text.find("<script")) != std::string::npos;) {
        const size_t end = text.find("</script>", at);
        REQUIRE(end != std::string::npos);
        text.erase(at, end + 9 - at);
    }
    return text;
}

// Pixels of the screenshot within `tolerance` of (r, g, b) in every channel.
size_t pixels_near(const unsigned char* rgb, size_t n, int r, int g, int b, int tolerance) {
    size_t found = 0;
    for (size_t i = 0; i < n; ++i)
        found += std::abs(rgb[3 * i] - r) <= tolerance && std::abs(rgb[3 * i + 1] - g) <= tolerance &&
                 std::abs(rgb[3 * i + 2] - b) <= tolerance;
    return found;
}

}  // namespace

TEST_CASE("report: a baseline and a G1 run on one page, drawn by headless Chromium") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    const fs::path corpus = tmp.path / "corpus.txt", baseline = tmp.path / "baseline", gated = tmp.path / "g1";
    {
        std::ofstream out(corpus);
        for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n%\n";
    }
    const int64_t layers = 2, heads = 2, T = 16;
    const std::string tiny = " --data " + corpus.string() + " --layers 2 --d-model 16 --heads 2 --batch 2 --seq-len 16" +
                             " --steps 4 --eval-every 2 --probe-every 2 --quiet --out ";
    REQUIRE(run_app(tmp, "train --attn baseline" + tiny + baseline.string()).code == 0);
    REQUIRE(run_app(tmp, "train --attn g1" + tiny + gated.string()).code == 0);

    const fs::path keep = fs::canonical("/proc/self/exe").parent_path() / "report", page = keep / "report.html";
    fs::create_directories(keep);
    fs::remove(page);
    const Outcome report = run_app(tmp, "report " + baseline.string() + " " + gated.string() + " --batches 2 --out " +
                                            page.string());
    INFO("report stdout: " << report.out << "\nstderr: " << report.err);
    REQUIRE(report.code == 0);
    CHECK(report.out.find("8 attention maps") != std::string::npos);
    const std::string html = read_file(page);
    // Self-contained: nothing fetched from anywhere.
    CHECK(count(html, "http://") == count(html, "http://www.w3.org/2000/svg"));  // only the SVG namespace
    CHECK(html.find("https://") == std::string::npos);
    CHECK(html.find(" src=") == std::string::npos);

    const std::string dom = rendered_dom(tmp, page, "page");
    const size_t maps = size_t(2 * layers * heads);
    INFO("status: " << dom.substr(std::min(dom.size(), dom.find("id=\"status\"")), 120));
    CHECK(dom.find("id=\"status\" hidden=\"\">ok: " + std::to_string(maps) + " maps<") != std::string::npos);
    CHECK(count(dom, "<canvas class=\"thumb") == maps);
    CHECK(count(dom, "<canvas class=\"thumb chosen\"") == 2);  // layer 0, head 0 of each run
    // The maps are T × T canvases, the big one of each run and every thumbnail; the gate column (G1 only) is 1 × T.
    const std::string square = "width=\"" + std::to_string(T) + "\" height=\"" + std::to_string(T) + "\"";
    CHECK(count(dom, "<canvas class=\"map\" " + square) == 2);
    CHECK(count(dom, "data-head=\"0\" " + square) + count(dom, "data-head=\"1\" " + square) == maps);
    CHECK(count(dom, "<canvas class=\"gate\" width=\"1\" height=\"" + std::to_string(T) + "\"") == 1);
    // The sink tables, one row per layer and run, and the curves of both runs with their probes.
    CHECK(count(dom, "mean first-token share ") == 2);
    CHECK(count(dom, "<tr><td>0</td>") + count(dom, "<tr class=\"sink\"><td>0</td>") == 2);
    CHECK(dom.find("largest attention logit") != std::string::npos);
    CHECK(dom.find("mean gate value") != std::string::npos);
    CHECK(dom.find("g1 validation") != std::string::npos);

    // The head chosen in the address: layer 1, head 1 of each run, in its panel and among the thumbnails.
    const std::string chosen = rendered_dom(tmp, page, "chosen", "'#layer=1&head=1'");
    CHECK(chosen.find("id=\"status\" hidden=\"\">ok: " + std::to_string(maps) + " maps<") != std::string::npos);
    CHECK(count(chosen, "<canvas class=\"thumb chosen\" data-layer=\"1\" data-head=\"1\"") == 2);
    CHECK(count(chosen, "layer 1, head 1: first-token share ") == 2);
    CHECK(count(dom, "layer 0, head 0: first-token share ") == 2);

    // The screenshot: query 0 can only attend to key 0, so the top-left cell of every map is
    // p = 1, plot.cpp's darkest blue (8, 48, 107); the G1 gate column is shades of orange.
    const fs::path png = keep / "report.png";
    fs::remove(png);
    const std::string shot = "timeout 120 chromium --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir=" +
                             (tmp.path / "profile-shot").string() + " --window-size=1280,4000 --screenshot=" +
                             png.string() + " file://" + page.string() + " >/dev/null 2>&1";
    REQUIRE(std::system(shot.c_str()) == 0);
    int width = 0, height = 0, channels = 0;
    unsigned char* rgb = stbi_load(png.string().c_str(), &width, &height, &channels, 3);
    REQUIRE(rgb != nullptr);
    CHECK(width == 1280);
    CHECK(height == 4000);
    const size_t n = size_t(width) * size_t(height);
    CHECK(pixels_near(rgb, n, 8, 48, 107, 3) > 100);  // the big maps' cells are 24 pixels a side
    CHECK(pixels_near(rgb, n, 255, 255, 255, 0) > n / 2);  // and the page is not one colour
    stbi_image_free(rgb);

    // Control: a page whose data the script cannot read says so in #status.
    std::string broken = html;
    const size_t at = broken.find("\"layers\":");
    REQUIRE(at != std::string::npos);
    broken.replace(at, 9, "\"strata\":");
    const fs::path broken_page = tmp.path / "broken.html";
    std::ofstream(broken_page) << broken;
    const std::string failed = rendered_dom(tmp, broken_page, "broken");
    CHECK(failed.find("id=\"status\" class=\"error\">error: ") != std::string::npos);
    CHECK(failed.find(">ok: ") == std::string::npos);
}

TEST_CASE("report: a run whose attention sits in a sink logit's slot shows the slot in its table, chart and maps") {
    // One layer of 2 heads with W_Q = 0: every score is 0, so query i gives each of its i + 1
    // keys 1/(20 + i + 1) and the slot, of logit log 20, the rest (tests/test_sink_analysis.cpp).
    gg::nn::LMConfig c;
    c.d_model = 8, c.n_layers = 1, c.attn.n_heads = 2, c.max_len = 8, c.attn.score_fn = gg::ScoreFunction::sink;
    gg::nn::GatedTransformerLM model(c);
    {
        gg::NoGradGuard no_grad;
        model.blocks[0]->attn->w_q->weight.fill_(0);
        model.blocks[0]->attn->sink.fill_(std::log(20.0));
    }
    const gg::Tensor ids = gg::from_vector(std::vector<int64_t>{256, 72, 101, 108, 108, 111, 32, 33}, {1, 8});
    gg::nn::RunReport run;
    run.name = "sink", run.gate = "g1", run.description = "a sink logit";
    run.log.step = {1, 2}, run.log.loss = {5, 4}, run.log.lr = {1e-3, 1e-3};
    run.log.grad_norm = {1, 1}, run.log.tokens_per_s = {100, 100};
    run.sink = gg::nn::analyze(model, ids);
    run.maps = gg::nn::capture_attention_maps(model, ids);
    TempDir tmp;
    const fs::path page = tmp.path / "sink.html";
    const std::string html = gg::nn::report_html({run});
    std::ofstream(page) << html;
    CHECK(html.find("This run has a sink in 1 of 1 layers (mean α or slot share above 0.3).") != std::string::npos);
    CHECK(html.find("sink: slot") != std::string::npos);  // the chart's second bar

    const std::string dom = rendered_dom(tmp, page, "sink");
    INFO("status: " << dom.substr(std::min(dom.size(), dom.find("id=\"status\"")), 120));
    INFO("summary: " << dom.substr(std::min(dom.size(), dom.find("mean first-token share")), 240));
    CHECK(dom.find("id=\"status\" hidden=\"\">ok: 2 maps<") != std::string::npos);
    CHECK(dom.find("<th>slot</th>") != std::string::npos);
    CHECK(dom.find("<td>0.040</td><td>0.805</td><td>yes</td>") != std::string::npos);
    CHECK(dom.find("mean first-token share 0.040, slot share 0.805; sink layers 1 of 1; sink heads (alpha or slot &gt; "
                   "0.3) 2 of 2; sink rate (Gu et al. 2024): first token 0.0%, slot 100.0%") != std::string::npos);
    CHECK(dom.find("layer 0, head 0: first-token share 0.040, slot 0.805 (over the sink's sequences)") !=
          std::string::npos);
    CHECK(count(dom, ", α 0.04, slot 0.81<") == 2);  // each head's thumbnail
}

// The text of every token box (<span class="tok" ...>text</span>) of a dumped page, one after another.
std::string token_boxes(const std::string& dom, size_t* boxes) {
    std::string text;
    *boxes = 0;
    for (size_t at = 0; (at = dom.find("<span class=\"tok\"", at)) != std::string::npos; ++*boxes) {
        at = dom.find('>', at) + 1;
        const size_t end = dom.find("</span>", at);
        text += dom.substr(at, end - at);
        at = end;
    }
    return text;
}

TEST_CASE("report --prompt: a model's attention over a prompt, its tokens as text, on HF folders and a checkpoint") {
    REQUIRE_MESSAGE(fs::exists(app_path()), "build the app first: " << app_path());
    TempDir tmp;
    // '<', '>' and '&' must reach the reader as text: the page escapes them, the script never parses them as HTML.
    const std::string prompt = "the gate <b>closes</b> & opens";
    const std::string escaped = "the gate &lt;b&gt;closes&lt;/b&gt; &amp; opens";
    for (const std::string folder : {"baseline", "headwise", "elementwise"}) {
        CAPTURE(folder);
        const fs::path page = tmp.path / (folder + ".html");
        const Outcome o = run_app(tmp, "report --hf tests/reference/hf/" + folder + " --prompt '" + prompt + "' --out " +
                                           page.string());
        INFO("stderr: " << o.err);
        REQUIRE(o.code == 0);
        const std::string html = read_file(page);
        CHECK(html.find("<b>") == std::string::npos);
        CHECK(html.find("https://") == std::string::npos);
        const std::string dom = rendered_dom(tmp, page, folder);
        INFO("status: " << dom.substr(std::min(dom.size(), dom.find("id=\"status\"")), 120));
        CHECK(dom.find("id=\"status\" hidden=\"\">ok: 8 maps<") != std::string::npos);  // 2 layers of 4 heads
        size_t T = 0;
        CHECK(token_boxes(dom, &T) == escaped);  // Qwen3 puts no BOS: the boxes are the prompt, token by token
        CHECK(T > 10);
        const std::string square = "width=\"" + std::to_string(T) + "\" height=\"" + std::to_string(T) + "\"";
        CHECK(count(dom, "<canvas class=\"map\" " + square) == 1);
        CHECK(count(dom, "<canvas class=\"gate\" width=\"1\" height=\"" + std::to_string(T) + "\"") ==
              (folder == "baseline" ? 0 : 1));
        CHECK(count(dom, "mean first-token share ") == 1);
        CHECK(dom.find("layer 0, head 0: first-token share ") != std::string::npos);
        CHECK(dom.find(" (over the prompt)</div>") != std::string::npos);
    }

    // A checkpoint of ours, with a sink logit: BOS first, and the slot's share in its table and maps.
    const fs::path corpus = tmp.path / "corpus.txt", run = tmp.path / "sink";
    {
        std::ofstream out(corpus);
        for (int i = 0; i < 40; ++i) out << "Fortune number " << i << ": the quick brown fox jumps over the lazy dog.\n";
    }
    REQUIRE(run_app(tmp, "train --attn g1 --score-fn sink --data " + corpus.string() +
                             " --layers 1 --d-model 16 --heads 2 --batch 2 --seq-len 16 --steps 2 --quiet --out " +
                             run.string()).code == 0);
    const fs::path page = tmp.path / "ckpt.html";
    const Outcome o = run_app(tmp, "report --ckpt " + (run / "model.safetensors").string() + " --prompt 'a <fox>' --out " +
                                       page.string());
    INFO("stderr: " << o.err);
    REQUIRE(o.code == 0);
    const std::string dom = rendered_dom(tmp, page, "ckpt");
    CHECK(dom.find("id=\"status\" hidden=\"\">ok: 2 maps<") != std::string::npos);
    size_t T = 0;
    CHECK(token_boxes(dom, &T) == "BOSa &lt;fox&gt;");  // one box a byte, after BOS
    CHECK(T == 8);
    CHECK(dom.find("<th>slot</th>") != std::string::npos);
    CHECK(dom.find("layer 0, head 0: first-token share ") != std::string::npos);
    CHECK(dom.find(", slot ") != std::string::npos);
    CHECK(count(dom, "<canvas class=\"gate\" width=\"1\" height=\"8\"") == 1);
}

int main(int argc, char** argv) {
    if (!have_chromium()) {
        std::printf("skipped: no chromium on PATH, so the report page cannot be loaded in a browser "
                    "(tools/setup installs it)\n");
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
