#include "subprocess.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli_common.h"

namespace openaclnn_cli {

ChildResult RunSelf(const std::vector<std::string> &args, const std::map<std::string, std::string> &env,
                    bool capture_stderr) {
    int out_pipe[2];
    int err_pipe[2] = {-1, -1};
    if (::pipe(out_pipe) != 0) Failure(std::string("pipe: ") + std::strerror(errno));
    if (capture_stderr && ::pipe(err_pipe) != 0) Failure(std::string("pipe: ") + std::strerror(errno));
    std::vector<std::string> argv_strings = {"openaclnn"};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char *> child_argv;
    for (std::string &s : argv_strings) child_argv.push_back(s.data());
    child_argv.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid < 0) Failure(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        for (const auto &[name, value] : env) {
            if (value.empty()) ::unsetenv(name.c_str());
            else ::setenv(name.c_str(), value.c_str(), 1);
        }
        ::dup2(out_pipe[1], STDOUT_FILENO);
        if (capture_stderr) ::dup2(err_pipe[1], STDERR_FILENO);
        ::close(out_pipe[0]);
        ::close(out_pipe[1]);
        if (capture_stderr) {
            ::close(err_pipe[0]);
            ::close(err_pipe[1]);
        }
        ::execv("/proc/self/exe", child_argv.data());
        const char *message = "openaclnn: cannot re-run /proc/self/exe\n";
        ssize_t ignored = ::write(STDERR_FILENO, message, std::strlen(message));
        (void)ignored;
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    if (capture_stderr) ::close(err_pipe[1]);

    ChildResult result;
    std::vector<pollfd> fds = {{out_pipe[0], POLLIN, 0}};
    if (capture_stderr) fds.push_back({err_pipe[0], POLLIN, 0});
    char buffer[4096];
    size_t open_fds = fds.size();
    while (open_fds > 0) {
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (size_t k = 0; k < fds.size(); ++k) {
            if (fds[k].fd < 0 || fds[k].revents == 0) continue;
            const ssize_t got = ::read(fds[k].fd, buffer, sizeof buffer);
            if (got > 0) {
                (k == 0 ? result.out : result.err).append(buffer, static_cast<size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                ::close(fds[k].fd);
                fds[k].fd = -1;
                --open_fds;
            }
        }
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

}  // namespace openaclnn_cli
