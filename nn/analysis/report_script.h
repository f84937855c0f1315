// report_script.h — the style and the script of report.h's page, kept apart from the C++ that
// writes its HTML: nn/analysis/report.css and report.js, compiled in as these strings at build
// time (nn/analysis/embed_text.py). The script draws the attention maps, the gate columns and
// the sink tables from the JSON the page embeds (report.cpp's page_data), and writes
// "ok: N maps" or the first error it met into #status.
#pragma once

namespace gg::nn {

extern const char* const kReportStyle;
extern const char* const kReportScript;

}  // namespace gg::nn
