// The subcommands. Each takes the arguments after its name and returns the exit status (or throws CliError).
#ifndef OPENACLNN_TOOLS_COMMANDS_H_
#define OPENACLNN_TOOLS_COMMANDS_H_

namespace openaclnn_cli {

int GradCommand(int argc, char **argv);
int CheckCommand(int argc, char **argv);
int ForwardCommand(int argc, char **argv);
int BenchCommand(int argc, char **argv);
int InfoCommand(int argc, char **argv);

// Hidden helpers run by `bench` and `info` in child processes (so that each gets its own environment).
int BenchWorkerCommand(int argc, char **argv);
int KernelProbeCommand(int argc, char **argv);

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_COMMANDS_H_
