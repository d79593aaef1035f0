// The picture `openaclnn bench --plot` draws: grouped bars of achieved GB/s per shape, the copy of the same bytes
// beside each group as the yardstick. Plain SVG written by hand (no dependencies).
#ifndef OPENACLNN_TOOLS_BENCH_PLOT_H_
#define OPENACLNN_TOOLS_BENCH_PLOT_H_

#include <string>
#include <vector>

namespace openaclnn_cli {

struct PlotPoint {
    std::string group;     // x category, first line: the shape, "4096x32000"
    std::string subgroup;  // x category, second line: "float32, 2 threads"
    std::string series;    // the bar within the category: the variant
    double op_gbps = 0;
    double copy_gbps = 0;  // the copy measured alongside this point
};

// Categories keep the order in which points first name them; series too.
std::string RenderBenchSvg(const std::string &title, const std::string &subtitle, const std::vector<PlotPoint> &points);

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_BENCH_PLOT_H_
