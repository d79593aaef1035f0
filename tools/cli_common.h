// Shared pieces of the openaclnn command-line tool: errors with exit statuses, the option parser, the compute
// dtypes and their exact conversions.
//
// Exit statuses (the same for every subcommand):
//   0  success (for `check`: the result matches within tolerance)
//   1  `check` only: the result does not match
//   2  bad input: wrong or missing arguments, unreadable or malformed .npy files, shape or dtype mismatches,
//      inputs the operator rejects; one line on stderr names the file or flag
//   3  the library or the system failed (out of memory, a runtime error the inputs do not explain)
#ifndef OPENACLNN_TOOLS_CLI_COMMON_H_
#define OPENACLNN_TOOLS_CLI_COMMON_H_

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "acl/acl_base.h"

namespace openaclnn_cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitMismatch = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitFailure = 3;

// Thrown anywhere; main() prints "openaclnn <command>: error: <message>" and exits with `status`.
class CliError : public std::runtime_error {
public:
    CliError(int status, const std::string &message) : std::runtime_error(message), status_(status) {}
    int status() const { return status_; }

private:
    int status_;
};

[[noreturn]] inline void BadInput(const std::string &message) { throw CliError(kExitBadInput, message); }
[[noreturn]] inline void Failure(const std::string &message) { throw CliError(kExitFailure, message); }

// ---- options --------------------------------------------------------------------------------------------------

struct OptionSpec {
    std::string name;        // "--log-prob", or "-o"
    std::string alias;       // another spelling ("--output"), may be empty
    bool takes_value;        // false: a switch
    std::string value_name;  // "FILE", "N", ... (help text)
    std::string help;
};

// Parsed options of one subcommand: `--name value`, `--name=value` and switches. Unknown options, missing values,
// repeated options and stray positional arguments are usage errors (status 2) naming the argument.
class Options {
public:
    Options(const std::string &command, const std::vector<OptionSpec> &specs, int argc, char **argv);

    bool Has(const std::string &name) const { return values_.count(name) != 0; }
    bool Help() const { return help_; }
    std::optional<std::string> Get(const std::string &name) const;
    std::string GetOr(const std::string &name, const std::string &fallback) const;
    // Numbers, parsed strictly (the whole string, finite where it says so); errors name the flag.
    double Double(const std::string &name, double fallback, bool require_finite = true) const;
    int64_t Int(const std::string &name, int64_t fallback) const;

private:
    std::string command_;
    std::map<std::string, std::string> values_;
    bool help_ = false;
};

double ParseDouble(const std::string &flag, const std::string &text, bool require_finite = true);
int64_t ParseInt(const std::string &flag, const std::string &text);
std::vector<std::string> SplitList(const std::string &text, char separator);

// Prints "usage" then the option table, wrapped to 100 columns.
std::string FormatHelp(const std::string &usage, const std::string &description, const std::vector<OptionSpec> &specs,
                       const std::string &epilogue);

// ---- compute dtypes -------------------------------------------------------------------------------------------

// The floating types the operators compute in. bf16 travels through .npy files as uint16 bit patterns
// (NumPy has no bfloat16): `--dtype bf16` says that a uint16 file holds them.
enum class ComputeType { kFloat32, kFloat16, kBf16 };

const char *ComputeTypeName(ComputeType type);  // "float32", "float16", "bf16"
aclDataType ToAclDataType(ComputeType type);
size_t ComputeTypeSize(ComputeType type);
// Accepts float32/fp32/f32, float16/fp16/f16/half, bf16/bfloat16; errors name the flag.
ComputeType ParseComputeType(const std::string &flag, const std::string &text);

// Exact loads and correctly rounded stores (round to nearest even, once; NaN stays NaN; overflow to infinity).
float HalfBitsToFloat(uint16_t h);
float Bf16BitsToFloat(uint16_t h);
uint16_t DoubleToHalfBits(double d);
uint16_t DoubleToBf16Bits(double d);

// Element i of a buffer of the given type, as a double (exact).
double LoadAsDouble(ComputeType type, const void *data, size_t i);
// Stores value into element i, rounded once to nearest even.
void StoreFromDouble(ComputeType type, void *data, size_t i, double value);

// Helpers for messages.
std::string ShapeString(const std::vector<int64_t> &shape);  // "(4, 10)", "()" for a scalar
std::string FormatDouble(double value);                      // shortest round-trip text

}  // namespace openaclnn_cli

#endif  // OPENACLNN_TOOLS_CLI_COMMON_H_
