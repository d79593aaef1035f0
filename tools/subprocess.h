// Running this same executable again in a child process with a changed environment: `bench` runs one worker per
// thread count (the library reads OPENACLNN_NUM_THREADS once per process) and `info` probes the kernel the
// library picks under each OPENACLNN_MAX_ISA cap.
#ifndef OPENACLNN_TOOLS_SUBPROCESS_H_
#define OPENACLNN_TOOLS_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace openaclnn_cli {

struct ChildResult {
    int exit_status = -1;  // the child's exit status, or 128 + signal
    std::string out;       // captured stdout
    std::string err;       // captured stderr (empty when it was passed through)
};

// Runs `openaclnn <args...>` (this executable) with `env` added to (or, for empty values, removed from) the current
// environment. stdout is captured; stderr is captured when capture_stderr, otherwise it goes to ours.
ChildResult RunSelf(const std::vector<std::string> &args, const std::map<std::string, std::string> &env,
                    bool capture_stderr);

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_SUBPROCESS_H_
