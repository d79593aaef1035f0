#include "cli_common.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

namespace openaclnn_cli {

// ---- options --------------------------------------------------------------------------------------------------

Options::Options(const std::string &command, const std::vector<OptionSpec> &specs, int argc, char **argv)
    : command_(command) {
    auto find = [&](const std::string &name) -> const OptionSpec * {
        for (const OptionSpec &spec : specs) {
            if (spec.name == name || (!spec.alias.empty() && spec.alias == name)) return &spec;
        }
        return nullptr;
    };
    const std::string see = " (see `openaclnn " + command + " --help`)";
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            help_ = true;
            continue;
        }
        if (arg.size() < 2 || arg[0] != '-') BadInput("unexpected argument '" + arg + "'" + see);
        std::string name = arg;
        std::optional<std::string> inline_value;
        if (arg.rfind("--", 0) == 0) {
            const size_t eq = arg.find('=');
            if (eq != std::string::npos) {
                name = arg.substr(0, eq);
                inline_value = arg.substr(eq + 1);
            }
        }
        const OptionSpec *spec = find(name);
        if (spec == nullptr) BadInput("unknown option " + name + see);
        if (values_.count(spec->name) != 0) BadInput("option " + spec->name + " given more than once");
        if (!spec->takes_value) {
            if (inline_value) BadInput("option " + spec->name + " takes no value");
            values_[spec->name] = "";
            continue;
        }
        if (inline_value) {
            values_[spec->name] = *inline_value;
        } else {
            if (i + 1 >= argc) BadInput("option " + spec->name + " needs a value (" + spec->value_name + ")");
            values_[spec->name] = argv[++i];
        }
        if (values_[spec->name].empty()) BadInput("option " + spec->name + " has an empty value");
    }
}

std::optional<std::string> Options::Get(const std::string &name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::string Options::GetOr(const std::string &name, const std::string &fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
}

double Options::Double(const std::string &name, double fallback, bool require_finite) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    return ParseDouble(name, it->second, require_finite);
}

int64_t Options::Int(const std::string &name, int64_t fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    return ParseInt(name, it->second);
}

double ParseDouble(const std::string &flag, const std::string &text, bool require_finite) {
    errno = 0;
    char *end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0]))) {
        BadInput(flag + ": '" + text + "' is not a number");
    }
    if (require_finite && !std::isfinite(value)) BadInput(flag + ": '" + text + "' is not a finite number");
    if (errno == ERANGE && std::isinf(value)) BadInput(flag + ": '" + text + "' is out of range");
    return value;
}

int64_t ParseInt(const std::string &flag, const std::string &text) {
    int64_t value = 0;
    const char *begin = text.data();
    const char *end = text.data() + text.size();
    if (begin != end && *begin == '+') ++begin;
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec == std::errc::result_out_of_range) BadInput(flag + ": '" + text + "' is out of the int64 range");
    if (ec != std::errc() || ptr != end || begin == end) BadInput(flag + ": '" + text + "' is not an integer");
    return value;
}

std::vector<std::string> SplitList(const std::string &text, char separator) {
    std::vector<std::string> parts;
    std::string current;
    for (char ch : text) {
        if (ch == separator) {
            parts.push_back(current);
            current.clear();
        } else if (!std::isspace(static_cast<unsigned char>(ch))) {
            current += ch;
        }
    }
    parts.push_back(current);
    return parts;
}

std::string FormatHelp(const std::string &usage, const std::string &description, const std::vector<OptionSpec> &specs,
                       const std::string &epilogue) {
    std::ostringstream os;
    os << "usage: " << usage << "\n\n" << description << "\n\noptions:\n";
    for (const OptionSpec &spec : specs) {
        std::string left = "  " + spec.name;
        if (!spec.alias.empty()) left += ", " + spec.alias;
        if (spec.takes_value) left += " " + spec.value_name;
        os << left;
        // Wrap the help text at 100 columns, indented to column 30.
        const size_t indent = 30;
        size_t column = left.size();
        if (column + 2 > indent) {
            os << "\n";
            column = 0;
        }
        os << std::string(indent - column, ' ');
        column = indent;
        std::istringstream words(spec.help);
        std::string word;
        bool first = true;
        while (words >> word) {
            if (!first && column + 1 + word.size() > 100) {
                os << "\n" << std::string(indent, ' ');
                column = indent;
                first = true;
            }
            if (!first) {
                os << ' ';
                ++column;
            }
            os << word;
            column += word.size();
            first = false;
        }
        os << "\n";
    }
    os << "  -h, --help                  this text\n";
    if (!epilogue.empty()) os << "\n" << epilogue;
    return os.str();
}

// ---- dtypes ---------------------------------------------------------------------------------------------------

const char *ComputeTypeName(ComputeType type) {
    switch (type) {
        case ComputeType::kFloat32: return "float32";
        case ComputeType::kFloat16: return "float16";
        case ComputeType::kBf16: return "bf16";
    }
    return "?";
}

aclDataType ToAclDataType(ComputeType type) {
    switch (type) {
        case ComputeType::kFloat32: return ACL_FLOAT;
        case ComputeType::kFloat16: return ACL_FLOAT16;
        case ComputeType::kBf16: return ACL_BF16;
    }
    return ACL_DT_UNDEFINED;
}

size_t ComputeTypeSize(ComputeType type) { return type == ComputeType::kFloat32 ? 4 : 2; }

ComputeType ParseComputeType(const std::string &flag, const std::string &text) {
    std::string t;
    for (char ch : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (t == "float32" || t == "fp32" || t == "f32" || t == "float") return ComputeType::kFloat32;
    if (t == "float16" || t == "fp16" || t == "f16" || t == "half") return ComputeType::kFloat16;
    if (t == "bf16" || t == "bfloat16") return ComputeType::kBf16;
    BadInput(flag + ": unknown dtype '" + text + "' (expected float32, float16 or bf16)");
}

static float BitsToFloat(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t FloatToBits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float HalfBitsToFloat(uint16_t h) {
    const bool negative = (h & 0x8000u) != 0;
    const int exponent = (h >> 10) & 0x1f;
    const int mantissa = h & 0x3ff;
    float magnitude;
    if (exponent == 0x1f) {
        magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    } else if (exponent == 0) {
        magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal: mantissa * 2^-24, exact
    } else {
        magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
    }
    return negative ? -magnitude : magnitude;
}

float Bf16BitsToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

// Rounds |d| to the nearest value with `fraction_bits` bits after the leading one and exponent >= min_exponent
// (below it, the fixed quantum of the subnormals), ties to even. The quotient a / quantum is exact (a power-of-two
// scaling of a double), so std::nearbyint (default rounding mode: to nearest, ties to even) rounds exactly once.
static double RoundMagnitude(double a, int fraction_bits, int min_exponent) {
    int binary_exponent;
    std::frexp(a, &binary_exponent);  // a = m * 2^binary_exponent, m in [0.5, 1)
    int exponent = binary_exponent - 1;
    if (exponent < min_exponent) exponent = min_exponent;
    const double quantum = std::ldexp(1.0, exponent - fraction_bits);
    return std::nearbyint(a / quantum) * quantum;
}

uint16_t DoubleToHalfBits(double d) {
    const uint16_t sign = std::signbit(d) ? 0x8000u : 0u;
    if (std::isnan(d)) return static_cast<uint16_t>(sign | 0x7e00u);
    const double a = std::fabs(d);
    if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7c00u);
    if (a == 0.0) return sign;
    const double r = RoundMagnitude(a, 10, -14);
    if (r > 65504.0) return static_cast<uint16_t>(sign | 0x7c00u);
    if (r < 6.103515625e-05) {  // 2^-14: subnormal, r = k * 2^-24
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(r, 24)));
    }
    const uint32_t bits = FloatToBits(static_cast<float>(r));  // exact: r has 11 significant bits
    const uint32_t exponent = ((bits >> 23) & 0xffu) - 127u + 15u;
    return static_cast<uint16_t>(sign | (exponent << 10) | ((bits >> 13) & 0x3ffu));
}

uint16_t DoubleToBf16Bits(double d) {
    const uint16_t sign = std::signbit(d) ? 0x8000u : 0u;
    if (std::isnan(d)) return static_cast<uint16_t>(sign | 0x7fc0u);
    const double a = std::fabs(d);
    if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7f80u);
    if (a == 0.0) return sign;
    const double r = RoundMagnitude(a, 7, -126);
    if (r > 3.3895313892515355e+38) return static_cast<uint16_t>(sign | 0x7f80u);  // bf16 max: (2 - 2^-7) * 2^127
    // r has at most 8 significant bits and is >= 2^-133, so it is exact in float and its low 16 bits are zero.
    return static_cast<uint16_t>(sign | (FloatToBits(static_cast<float>(r)) >> 16));
}

double LoadAsDouble(ComputeType type, const void *data, size_t i) {
    switch (type) {
        case ComputeType::kFloat32: return static_cast<const float *>(data)[i];
        case ComputeType::kFloat16: return HalfBitsToFloat(static_cast<const uint16_t *>(data)[i]);
        case ComputeType::kBf16: return Bf16BitsToFloat(static_cast<const uint16_t *>(data)[i]);
    }
    return 0.0;
}

void StoreFromDouble(ComputeType type, void *data, size_t i, double value) {
    switch (type) {
        case ComputeType::kFloat32: static_cast<float *>(data)[i] = static_cast<float>(value); break;  // RNE cast
        case ComputeType::kFloat16: static_cast<uint16_t *>(data)[i] = DoubleToHalfBits(value); break;
        case ComputeType::kBf16: static_cast<uint16_t *>(data)[i] = DoubleToBf16Bits(value); break;
    }
}

std::string ShapeString(const std::vector<int64_t> &shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    if (shape.size() == 1) s += ",";
    return s + ")";
}

std::string FormatDouble(double value) {
    char buffer[64];
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    for (int precision = 6; precision <= 17; ++precision) {
        std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
        if (std::strtod(buffer, nullptr) == value) break;
    }
    return buffer;
}

}  // namespace openaclnn_cli
