#include "bench_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace openaclnn_cli {

namespace {

std::string Xml(const std::string &s) {
    std::string out;
    for (char ch : s) {
        switch (ch) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += ch;
        }
    }
    return out;
}

std::string Num(double v, int precision = 3) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    return buf;
}

std::string Px(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

// A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) giving about `target` intervals up to max_value.
double NiceStep(double max_value, int target) {
    const double raw = max_value / target;
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
        if (m * power >= raw) return m * power;
    }
    return 10.0 * power;
}

const char *SeriesColor(const std::string &series, size_t index) {
    static const std::map<std::string, const char *> known = {
        {"plain", "#1f77b4"}, {"weighted", "#ff7f0e"}, {"smoothed", "#2ca02c"}, {"zloss", "#d62728"}};
    static const char *palette[] = {"#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"};
    auto it = known.find(series);
    return it != known.end() ? it->second : palette[index % 5];
}

}  // namespace

std::string RenderBenchSvg(const std::string &title, const std::string &subtitle, const std::vector<PlotPoint> &points) {
    // Categories and series in order of first appearance.
    std::vector<std::pair<std::string, std::string>> categories;
    std::vector<std::string> series;
    for (const PlotPoint &p : points) {
        if (std::find(categories.begin(), categories.end(), std::make_pair(p.group, p.subgroup)) == categories.end()) {
            categories.emplace_back(p.group, p.subgroup);
        }
        if (std::find(series.begin(), series.end(), p.series) == series.end()) series.push_back(p.series);
    }
    // One copy bar per category: the median of the copies measured next to its points.
    auto category_copy = [&](const std::pair<std::string, std::string> &category) {
        std::vector<double> copies;
        for (const PlotPoint &p : points) {
            if (p.group == category.first && p.subgroup == category.second) copies.push_back(p.copy_gbps);
        }
        if (copies.empty()) return 0.0;
        std::sort(copies.begin(), copies.end());
        const size_t m = copies.size() / 2;
        return copies.size() % 2 ? copies[m] : 0.5 * (copies[m - 1] + copies[m]);
    };
    double max_gbps = 0;
    for (const PlotPoint &p : points) max_gbps = std::max(max_gbps, p.op_gbps);
    for (const auto &category : categories) max_gbps = std::max(max_gbps, category_copy(category));
    if (!(max_gbps > 0)) max_gbps = 1;

    const double bar = 34, bar_gap = 6, category_pad = 36;
    const double bars_per_category = static_cast<double>(series.size() + 1);  // + the copy
    const double category_width = bars_per_category * bar + (bars_per_category - 1) * bar_gap + category_pad;
    const double left = 84, right = 36, top = 112, plot_height = 380, bottom = 96;
    const double plot_width = std::max(420.0, category_width * static_cast<double>(categories.size()));
    const double width = left + plot_width + right;
    const double height = top + plot_height + bottom;
    const double step = NiceStep(max_gbps * 1.08, 6);
    const double y_max = std::ceil(max_gbps * 1.08 / step) * step;
    auto y_of = [&](double gbps) { return top + plot_height - gbps / y_max * plot_height; };

    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Px(width) << "\" height=\"" << Px(height)
        << "\" viewBox=\"0 0 " << Px(width) << " " << Px(height) << "\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n";
    svg << "<defs><pattern id=\"copyhatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
           "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#bdbdbd\"/>"
           "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#8a8a8a\" stroke-width=\"2\"/></pattern></defs>\n";
    svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    svg << "<text x=\"" << Px(width / 2) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">"
        << Xml(title) << "</text>\n";
    svg << "<text x=\"" << Px(width / 2) << "\" y=\"50\" text-anchor=\"middle\" font-size=\"12\" fill=\"#444\">"
        << Xml(subtitle) << "</text>\n";

    // Legend: the copy, then each series.
    {
        std::vector<std::pair<std::string, std::string>> entries = {{"copy of the same bytes (median)", "url(#copyhatch)"}};
        for (size_t k = 0; k < series.size(); ++k) entries.emplace_back(series[k], SeriesColor(series[k], k));
        double total = 0;
        for (const auto &e : entries) total += 22 + 7.0 * static_cast<double>(e.first.size()) + 18;
        double x = std::max(left, (width - total) / 2);
        for (const auto &e : entries) {
            svg << "<rect x=\"" << Px(x) << "\" y=\"66\" width=\"16\" height=\"14\" fill=\"" << e.second
                << "\" stroke=\"#555\" stroke-width=\"0.5\"/>\n";
            svg << "<text x=\"" << Px(x + 22) << "\" y=\"78\" font-size=\"12\">" << Xml(e.first) << "</text>\n";
            x += 22 + 7.0 * static_cast<double>(e.first.size()) + 18;
        }
        svg << "<text x=\"" << Px(width / 2) << "\" y=\"100\" text-anchor=\"middle\" font-size=\"11\" fill=\"#444\">"
            << "number in a bar: the operator's time per call / the copy's (1.00x = memory speed)</text>\n";
    }

    // Grid, y ticks and axis title.
    for (double v = 0; v <= y_max + step * 0.01; v += step) {
        const double y = y_of(v);
        svg << "<line x1=\"" << Px(left) << "\" y1=\"" << Px(y) << "\" x2=\"" << Px(left + plot_width) << "\" y2=\""
            << Px(y) << "\" stroke=\"" << (v == 0 ? "#333" : "#e3e3e3") << "\" stroke-width=\"1\"/>\n";
        svg << "<text x=\"" << Px(left - 8) << "\" y=\"" << Px(y + 4) << "\" text-anchor=\"end\" font-size=\"11\">"
            << Num(v, 4) << "</text>\n";
    }
    svg << "<line x1=\"" << Px(left) << "\" y1=\"" << Px(top) << "\" x2=\"" << Px(left) << "\" y2=\""
        << Px(top + plot_height) << "\" stroke=\"#333\"/>\n";
    svg << "<text transform=\"translate(" << Px(26) << "," << Px(top + plot_height / 2)
        << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">achieved GB/s (higher is better)</text>\n";

    // Bars.
    for (size_t ci = 0; ci < categories.size(); ++ci) {
        const double x0 = left + category_pad / 2 + static_cast<double>(ci) * category_width;
        std::vector<const PlotPoint *> in_category;
        for (const PlotPoint &p : points) {
            if (p.group == categories[ci].first && p.subgroup == categories[ci].second) in_category.push_back(&p);
        }
        const double copy_gbps = category_copy(categories[ci]);
        auto draw_bar = [&](double x, double gbps, const std::string &fill, const std::string &inside,
                            const std::string &tooltip) {
            const double y = y_of(gbps);
            const double h = top + plot_height - y;
            svg << "<rect x=\"" << Px(x) << "\" y=\"" << Px(y) << "\" width=\"" << Px(bar) << "\" height=\"" << Px(h)
                << "\" fill=\"" << fill << "\"><title>" << Xml(tooltip) << "</title></rect>\n";
            svg << "<text x=\"" << Px(x + bar / 2) << "\" y=\"" << Px(y - 4)
                << "\" text-anchor=\"middle\" font-size=\"10.5\">" << Num(gbps, 3) << "</text>\n";
            if (!inside.empty()) {
                const bool fits = h >= 20;
                svg << "<text x=\"" << Px(x + bar / 2) << "\" y=\"" << Px(fits ? y + 14 : y - 16)
                    << "\" text-anchor=\"middle\" font-size=\"10\" fill=\"" << (fits ? "white" : "#222") << "\">"
                    << Xml(inside) << "</text>\n";
            }
        };
        draw_bar(x0, copy_gbps, "url(#copyhatch)", "",
                 categories[ci].first + " " + categories[ci].second + ": copy " + Num(copy_gbps) + " GB/s");
        for (size_t k = 0; k < series.size(); ++k) {
            const double x = x0 + static_cast<double>(k + 1) * (bar + bar_gap);
            for (const PlotPoint *p : in_category) {
                if (p->series != series[k]) continue;
                const double ratio = p->copy_gbps / p->op_gbps;  // = op time / copy time
                char inside[32];
                std::snprintf(inside, sizeof inside, ratio < 10 ? "%.2fx" : "%.1fx", ratio);
                draw_bar(x, p->op_gbps, SeriesColor(series[k], k), inside,
                         categories[ci].first + " " + categories[ci].second + " " + series[k] + ": " +
                             Num(p->op_gbps) + " GB/s, " + inside + " the copy's time");
            }
        }
        const double center = x0 + (category_width - category_pad) / 2;
        svg << "<text x=\"" << Px(center) << "\" y=\"" << Px(top + plot_height + 20)
            << "\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">" << Xml(categories[ci].first)
            << "</text>\n";
        svg << "<text x=\"" << Px(center) << "\" y=\"" << Px(top + plot_height + 37)
            << "\" text-anchor=\"middle\" font-size=\"11.5\" fill=\"#333\">" << Xml(categories[ci].second)
            << "</text>\n";
    }
    svg << "<text x=\"" << Px(left + plot_width / 2) << "\" y=\"" << Px(height - 22)
        << "\" text-anchor=\"middle\" font-size=\"13\">problem shape N×C (dtype, threads)</text>\n";
    svg << "</svg>\n";
    return svg.str();
}

}  // namespace openaclnn_cli
